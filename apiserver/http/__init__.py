"""HTTP routing, discovery, OpenAPI, Table printing, audit and fault injection (the top layer)."""
