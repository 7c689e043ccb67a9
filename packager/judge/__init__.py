"""The browser judge of SWEeper tasks: the judge image (Chromium and a pinned browser-use) and
the replay server that stands in for a model endpoint in tests.
"""
