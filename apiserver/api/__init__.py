"""What the served API is made of: the resource table, field errors, Go-style rendering.

The bottom layer: it imports nothing else of the server."""
