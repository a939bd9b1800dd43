"""The HTTP API (and, later, the operator console) the gateway serves: FastAPI on uvicorn.

It goes through the same public runtime API as the CLI; who may do what is :mod:`exchange._auth`'s.
"""
