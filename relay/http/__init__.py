"""HTTP layer: the Starlette app, its route table and wire shapes."""
