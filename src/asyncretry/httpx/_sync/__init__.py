# Generated from src/asyncretry/httpx/_async/__init__.py by tools/generate.py:
# edit that file, then run `python tools/generate.py`.
"""The transport of one I/O mode: ``_async`` is written by hand, ``_sync`` is generated from it by
``tools/generate.py`` (unasync), so that every rule of the request loop is written once."""
