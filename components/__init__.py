"""The inference-fleet library that ``__main__.py`` composes."""
