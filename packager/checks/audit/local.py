"""An image read from the engine's own store on this host, one layer at a time, when it can be.

`docker save` exports every layer of an image (the engine writes them all out first), so an
audit that needs one new layer would still wait for all of them. When the engine keeps its
images in an overlay2 store this host can read, an image's config and any one layer tar are
rebuilt from the store as the engine itself rebuilds them for `save` (the layer's tar-split
record: the tar headers, with each file's bytes read from the layer's folder). Nothing read
here is taken on trust: the config must hash to the image id, each layer tar to the diff id
the config names, or the audit falls back to `docker save`. This module must not write to the
engine's store.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LocalStore:
    """The engine's image metadata (`image/overlay2`) and layer folders (`overlay2`)."""

    meta: Path
    layers: Path


def open_local_store(client: Any) -> LocalStore | None:
    """The engine's overlay2 store when it is readable from here, else None."""
    try:
        info = client.info()
    except Exception:  # noqa: BLE001 - any client that cannot say: the save path
        return None
    if not isinstance(info, dict) or info.get("Driver") != "overlay2":
        return None
    root = Path(str(info.get("DockerRootDir") or "/nonexistent"))
    store = LocalStore(root / "image" / "overlay2", root / "overlay2")
    layerdb = store.meta / "layerdb" / "sha256"
    return store if os.access(layerdb, os.R_OK | os.X_OK) else None


def read_config(store: LocalStore, image_id: str) -> bytes | None:
    """The image's config as stored, when its sha256 is the image id."""
    hexa = image_id.removeprefix("sha256:")
    try:
        data = (store.meta / "imagedb" / "content" / "sha256" / hexa).read_bytes()
    except (OSError, ValueError):
        return None
    return data if hashlib.sha256(data).hexdigest() == hexa else None


def chain_ids(diff_ids: list[str]) -> list[str]:
    """The layer store's key of each layer: its diff id chained with those below it."""
    out: list[str] = []
    for diff_id in diff_ids:
        if out:
            chained = f"{out[-1]} {diff_id}".encode()
            out.append("sha256:" + hashlib.sha256(chained).hexdigest())
        else:
            out.append(diff_id)
    return out


def layer_chunks(store: LocalStore, chain_id: str) -> Iterator[bytes]:
    """The layer tar, rebuilt from its tar-split record and its folder (unverified: the caller
    hashes it against the diff id). Raises OSError or ValueError when the store lacks a part.
    """
    entry_dir = store.meta / "layerdb" / "sha256" / chain_id.removeprefix("sha256:")
    cache_id = (entry_dir / "cache-id").read_text().strip()
    if not cache_id or "/" in cache_id or cache_id.startswith("."):
        raise ValueError(f"odd cache id in {entry_dir}")
    root = os.fsencode(store.layers / cache_id / "diff")
    with gzip.open(entry_dir / "tar-split.json.gz", "rb") as records:
        for raw in records:
            entry = json.loads(raw)
            if entry.get("type") == 2:
                yield base64.b64decode(entry.get("payload") or "")
            elif entry.get("type") == 1 and entry.get("size"):
                raw_name = entry.get("name_raw")
                name = base64.b64decode(raw_name) if raw_name else entry["name"].encode()
                with open(os.path.join(root, name.lstrip(b"/")), "rb") as fh:  # noqa: PTH123
                    while chunk := fh.read(1 << 20):
                        yield chunk
