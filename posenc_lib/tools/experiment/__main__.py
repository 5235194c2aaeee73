"""``python -m posenc_lib.tools.experiment [options]``: the same command line as
``python -m posenc_lib experiment`` (:func:`~posenc_lib.tools.experiment.main`)."""

from .running import main

if __name__ == "__main__":
    main()
