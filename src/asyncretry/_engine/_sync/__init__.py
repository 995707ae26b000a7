# Generated from src/asyncretry/_engine/_async/__init__.py by tools/generate.py:
# edit that file, then run `python tools/generate.py`.
"""The engine's steps that may wait, written once: their synchronous twins are generated into ``_sync``."""
