"""The HTTP app: FastAPI's REST routes with the Gradio UI and /v1 mounted behind the wall (``server``), and
uvicorn with its limits (``http_server``)."""
