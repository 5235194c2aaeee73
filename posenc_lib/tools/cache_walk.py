"""One walk over any transformers cache object: each tensor it holds, classified.

``python -m posenc_lib inspect --crosscheck`` (:func:`posenc_lib.tools.crosscheck.filled_cache_bytes`)
and the conformance sweep (:func:`posenc_lib.tools.tiny_model.cache_bytes`) both
count what a model's filled cache holds; both go through :func:`walk`.

A tensor's class comes from the attribute or key names on its path from the
cache object, the nearest name that decides winning:

- ``state``: the fixed-size state of linear-attention, convolution, Mamba and
  RG-LRU layers (names containing ``conv``, ``ssm``, ``recurrent``, ``rg_lru``,
  ``linear_cache`` (MiniMax), ``state``/``states`` alone);
- ``kv``: keys and values (``keys``, ``values``, ``key_cache``, ``value_cache``,
  ``key_states``, ``value_states``, ``key``, ``value``, ``k``, ``v``) and any
  other floating tensor of a cache layer (DeepSeek-V3.2's ``indexer_keys``,
  which also grow with the tokens);
- skipped: integer tensors (lengths, positions), ``config``, and Gemma 3n's
  ``shared_layers`` (references to other layers' tensors); a tensor whose
  storage was already counted is not counted twice.

Containers walked: tuples and lists (the legacy ``(keys, values)`` per layer
and ``DynamicCache.layers``), dicts (5.x ``LinearAttentionLayer.conv_states``:
one entry per state index), and objects of transformers' classes (4.x
``DynamicCache``/``HybridCache``/``HybridMambaAttentionDynamicCache``, 5.x
cache layer classes, ``MambaCache``). A model whose forward returns no cache
(RecurrentGemma keeps it in its modules) is walked through its modules'
``key_states``/``value_states`` and ``recurrent_states``/``conv1d_state``/
``rg_lru_state`` buffers (walked beside the cache when there is one: 5.x
RecurrentGemma keeps its keys in a ``DynamicCache`` and its recurrent states
in its modules).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = ["Walk", "classify_name", "fill_cache", "walk"]

KV_NAMES = frozenset(("key", "value", "keys", "values", "key_cache", "value_cache",
                      "key_states", "value_states", "k", "v"))
STATE_PARTS = ("conv", "ssm", "recurrent", "rg_lru", "linear_cache")
STATE_NAMES = frozenset(("state", "states"))
SKIP_NAMES = frozenset(("config", "shared_layers", "device", "dtype"))


def classify_name(name: str) -> str | None:
    """``"state"``, ``"kv"`` or ``None`` (the name does not decide)."""
    low = name.lower()
    if low in SKIP_NAMES:
        return "skip"
    if low in STATE_NAMES or any(p in low for p in STATE_PARTS):
        return "state"
    if low in KV_NAMES or low.endswith(("_keys", "_values")):
        return "kv"
    return None


@dataclass
class Walk:
    """What :func:`walk` found: bytes per class and each tensor's path."""

    kv: int = 0
    state: int = 0
    cls: str = "none"
    tensors: list = field(default_factory=list)  # (path, class, bytes)

    @property
    def found(self) -> bool:
        return bool(self.tensors)


def walk(cache, model=None, *, max_depth: int = 8) -> Walk:
    """Classify every floating tensor of ``cache`` (see the module docstring).

    ``model``: its modules' RecurrentGemma buffers are counted too (a tensor
    already counted through ``cache`` is not counted again).
    """
    out = Walk(cls=type(cache).__name__ if cache is not None else "none")
    seen_storage: set = set()
    seen_obj: set = set()

    def add(t: torch.Tensor, path: str, kind: str):
        if not t.is_floating_point() or t.numel() == 0:
            return
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), t.numel(), t.dtype)
        if key in seen_storage:
            return
        seen_storage.add(key)
        size = t.numel() * t.element_size()
        setattr(out, kind, getattr(out, kind) + size)
        out.tensors.append((path, kind, size))

    def visit(obj, path: str, kind: str, depth: int):
        if obj is None or depth > max_depth:
            return
        if isinstance(obj, torch.Tensor):
            add(obj, path, kind)
            return
        if id(obj) in seen_obj:
            return
        seen_obj.add(id(obj))
        if isinstance(obj, (list, tuple)):
            for i, x in enumerate(obj):
                visit(x, f"{path}[{i}]", kind, depth + 1)
            return
        items = None
        if isinstance(obj, dict) or (hasattr(obj, "items") and hasattr(obj, "keys")
                                     and type(obj).__module__.startswith("transformers")):
            items = list(obj.items())  # dicts and 5.x KVSharingDict
        elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("transformers"):
            items = list(vars(obj).items())
        if items is None:
            return
        for name, x in items:
            decided = classify_name(str(name)) if isinstance(name, str) else None
            if decided == "skip":
                continue
            # a state container stays state (its entries are indices or names
            # such as "conv"); otherwise the nearest deciding name wins
            sub = kind if kind == "state" or decided is None else decided
            visit(x, f"{path}.{name}", sub, depth + 1)

    if cache is not None:
        visit(cache, "cache", "kv", 0)
    if model is not None:  # RecurrentGemma: buffers of its modules (5.x: beside
        # the DynamicCache that holds its attention layers' keys and values)
        for mname, m in model.named_modules():
            for name in ("key_states", "value_states", "recurrent_states",
                         "conv1d_state", "rg_lru_state"):
                t = getattr(m, name, None)
                if isinstance(t, torch.Tensor):
                    add(t, f"{mname}.{name}", classify_name(name))
    if cache is None and out.tensors:
        out.cls = "module buffers"
    return out


def fill_cache(model, built, tokens: int):
    """The cache ``model`` holds after one forward pass of ``tokens`` tokens.

    The forward pass's ``past_key_values`` (or ``cache_params``/``state``:
    Mamba, RWKV); where the model makes none itself, the one its
    ``prepare_inputs_for_generation`` creates, as ``generate()`` does
    (Falcon-H1, GraniteMoeHybrid, Jamba, Bamba: their hybrid caches); for a
    5.x model whose forward drops the cache it makes, one passed in ``cache``
    as ``generate()`` does; ``None`` for a model that keeps its cache in its
    modules (4.x RecurrentGemma: walk the model).
    """
    vocab = getattr(built, "vocab_size", None) or 16
    ids = torch.arange(tokens)[None] % max(vocab - 3, 1) + min(3, vocab - 1)

    def run(**kwargs):
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=True, **kwargs)
        cache = getattr(out, "past_key_values", None)
        if cache is None:
            cache = getattr(out, "cache_params", None) or getattr(out, "state", None)
        return cache

    cache = run()
    if cache is None and hasattr(model, "prepare_inputs_for_generation"):
        try:
            prep = model.prepare_inputs_for_generation(ids, use_cache=True)
        except Exception:  # noqa: BLE001 -- then the model's own cache is None
            prep = {}
        if prep.get("past_key_values") is not None:
            cache = run(past_key_values=prep["past_key_values"])
    if cache is None:
        cache = _given_cache(model, built, run)
    return cache


def _given_cache(model, built, run):
    """transformers 5.x's RecurrentGemma returns no cache from a forward pass
    (it builds a ``DynamicCache`` and drops it); ``generate()`` passes one in
    ``cache``: the cache after a forward pass given one, or ``None``."""
    import inspect

    try:
        from transformers import DynamicCache
    except ImportError:  # pragma: no cover -- every supported release has it
        return None
    if "cache" not in inspect.signature(model.forward).parameters:
        return None
    cache = DynamicCache(config=built)
    run(cache=cache)
    return cache
