"""The HTTP service: the starlette app, its routes, bodies, answers and errors."""
