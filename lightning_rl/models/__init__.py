"""Neural network models: building blocks and the task models agents act with.

Every task model takes inputs with leading dims ``[]``, ``[B]`` or ``[T, B]`` and returns
outputs with the same leading dims; recurrent ones also take and return an ``RnnState``.

Every task model's first two parameters are the env-dependent ones, positional:
``(observation_shape, action_size)``, or ``(image_shape, output_size)`` for the Atari models. An
agent's ``model`` argument (a :data:`ModelFactory`) is called with exactly these two, so any
model class with its other arguments from a config can stand in for the agent's own choice.
"""

from lightning_rl.models.atari import (
    ATARI_CONVS,
    AtariCatDqnModel,
    AtariDqnModel,
    AtariFfModel,
    AtariLstmModel,
    AtariR2d1Model,
    atari_encoder,
)
from lightning_rl.models.base import (
    CompositeEncoder,
    FeedForwardModel,
    FieldEncoder,
    ImageEncoder,
    ModelFactory,
    ObservationShape,
    OneHotEncoder,
    RecurrentModel,
    VectorEncoder,
    array_image_layout,
    image_layout,
    is_recurrent_model,
    make_encoder,
)
from lightning_rl.models.blocks import (
    Conv2dHeadModel,
    Conv2dModel,
    DistributionalDuelingHeadModel,
    DistributionalHeadModel,
    DuelingHeadModel,
    MlpModel,
    ScaleGrad,
    conv2d_output_shape,
    init_orthogonal_,
    make_q_head,
    scale_grad,
    strip_ddp_state_dict,
    update_state_dict,
)
from lightning_rl.models.dqn import CatDqnMlpModel, DqnMlpModel, R2d1MlpModel
from lightning_rl.models.normalization import RunningMeanStdModel
from lightning_rl.models.pg import (
    CategoricalPgHead,
    CategoricalPgLstmModel,
    CategoricalPgMlpModel,
    GaussianPgHead,
    GaussianPgLstmModel,
    GaussianPgMlpModel,
)
from lightning_rl.models.qpg import MuMlpModel, PiMlpModel, QofMuMlpModel
from lightning_rl.models.recurrent import LstmCore, RnnState

__all__ = [
    "ATARI_CONVS",
    "AtariCatDqnModel",
    "AtariDqnModel",
    "AtariFfModel",
    "AtariLstmModel",
    "AtariR2d1Model",
    "CatDqnMlpModel",
    "CategoricalPgHead",
    "CategoricalPgLstmModel",
    "CategoricalPgMlpModel",
    "CompositeEncoder",
    "FieldEncoder",
    "OneHotEncoder",
    "Conv2dHeadModel",
    "Conv2dModel",
    "DistributionalDuelingHeadModel",
    "DistributionalHeadModel",
    "DqnMlpModel",
    "DuelingHeadModel",
    "FeedForwardModel",
    "GaussianPgHead",
    "GaussianPgLstmModel",
    "GaussianPgMlpModel",
    "ImageEncoder",
    "LstmCore",
    "MlpModel",
    "ModelFactory",
    "MuMlpModel",
    "ObservationShape",
    "PiMlpModel",
    "QofMuMlpModel",
    "R2d1MlpModel",
    "RecurrentModel",
    "RnnState",
    "RunningMeanStdModel",
    "ScaleGrad",
    "VectorEncoder",
    "array_image_layout",
    "atari_encoder",
    "conv2d_output_shape",
    "image_layout",
    "init_orthogonal_",
    "is_recurrent_model",
    "make_encoder",
    "make_q_head",
    "scale_grad",
    "strip_ddp_state_dict",
    "update_state_dict",
]
