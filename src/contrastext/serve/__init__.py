"""HTTP serving on Ray Serve: embedding, zero-shot classification and clustering endpoints, and a web page.

``contrastext.serve.config`` (settings) imports nothing heavy; ``contrastext.serve.app`` builds and runs the
application (``build_app``, ``run_serve``, ``app_builder`` for ``serve deploy``).
"""
