"""Docker images on the host's engine: the client, builds, base images, flattening.

- `build`: the engine connection, run labels and sweeps, image builds with their logs and
  timeouts, the environment image shared by tasks of one repository state.
- `bases`: Debian base images seeded offline from Debian's archive when no registry answers.
- `pythons`: which image serves the Python a row asks for.
- `flatten`: published harness images flattened into one clean layer before use.
- `tar`: build contexts and archives streamed to and from the engine.
- `failures`: a failed build's log read for the first cause worth naming.
- `hud_build`: the HUD environment image of a task.
- `locks`: machine-wide locks, so two workers never build the same image at once.
"""
