"""Overseer's built-in controllers, loaded through the ``overseer.controllers`` entry points."""
