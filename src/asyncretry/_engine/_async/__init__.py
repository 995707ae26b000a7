"""The engine's steps that may wait, written once: their synchronous twins are generated into ``_sync``."""
