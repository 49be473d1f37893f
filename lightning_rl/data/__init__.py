"""Sample containers and helpers: namedarraytuples, ``[T, B]`` array helpers, buffers, flat dicts."""

from lightning_rl.data.arrays import (
    empty,
    extract_sequences,
    from_onehot,
    infer_leading_dims,
    iterate_mb_idxs,
    restore_leading_dims,
    select_at_indexes,
    to_onehot,
    valid_mean,
    zeros,
)
from lightning_rl.data.buffers import (
    buffer_from_example,
    buffer_func,
    buffer_method,
    buffer_nbytes,
    buffer_to,
    build_array,
    get_leading_dims,
    np_mp_array,
    numpify_buffer,
    torchify_buffer,
)
from lightning_rl.data.namedarraytuple import (
    AttrDict,
    NamedArrayTuple,
    NamedArrayTupleBase,
    NamedArrayTupleSchema,
    NamedArrayTupleSchema_like,
    NamedTuple,
    NamedTupleSchema,
    is_namedarraytuple,
    is_namedarraytuple_class,
    is_namedtuple,
    is_namedtuple_class,
    namedarraytuple,
    namedarraytuple_like,
)
