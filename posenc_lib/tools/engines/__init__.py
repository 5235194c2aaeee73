"""What three inference engines do with a model's RoPE configuration (being split
per engine; see the submodules)."""

from .compare import *  # noqa: F401,F403
