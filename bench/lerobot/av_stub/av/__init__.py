"""A stand-in for PyAV on the GPU machine, which lacks it (its wheel is 40 MB of the kit's 64).

LeRobot 0.6.1 imports `av` whenever its dataset or policy modules load, and uses it only to
decode and encode video. The GPU side-by-side reads datasets whose images are stored in parquet,
so nothing here is ever called: attribute lookups (`av.logging.WARNING` as a default argument,
`av.codec.Codec | None` in annotations) give placeholders, and calling one raises.
"""


class _Placeholder:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attribute):
        return _Placeholder(f"{self._name}.{attribute}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name}: PyAV is not installed on this machine (a stub stands in for it)")

    def __or__(self, other):
        return self

    def __ror__(self, other):
        return self

    def __repr__(self):
        return f"<PyAV stub {self._name}>"


def __getattr__(name):
    return _Placeholder(f"av.{name}")
