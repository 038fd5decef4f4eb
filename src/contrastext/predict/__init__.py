"""Apply a trained model to a whole corpus: the ``predict`` job's parts.

``config`` (the job's settings), ``inputs`` (which files, cut into units, read into chunks of texts),
``predictors`` (what a model folder is and the columns it gives a chunk), ``outputs`` (the chunk files and
what a finished run is). The job itself is ``contrastext.pipelines.predict``.
"""
