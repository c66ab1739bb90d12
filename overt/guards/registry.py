"""The checks every guard session runs, in the order their hooks are called.

Adding a check: write a :class:`~overt.guards.check.Check` subclass in its own
module and add it here (docs/architecture.md, "Adding a check").  The order
matters only where one check's findings or state feed another's: gradients
first (their findings decide whether ``params-not-updating`` and ``no-gradient``
are worth reporting), the data pipeline after them, the cross-rank collective last.
"""

from __future__ import annotations

from overt.guards.activations import ActivationChecks
from overt.guards.adapterinit import AdapterInitChecks
from overt.guards.attnmask import AttentionMaskChecks
from overt.guards.axes import AxisChecks
from overt.guards.axisflip import TransformAxisChecks
from overt.guards.carried import CarriedStateChecks
from overt.guards.castcache import AutocastCacheChecks
from overt.guards.check import Check
from overt.guards.classweights import ClassWeightChecks
from overt.guards.coverage import CoverageChecks
from overt.guards.ctcblank import CtcBlankChecks
from overt.guards.data import DataChecks
from overt.guards.datamut import DataMutationChecks
from overt.guards.deadterm import DeadTermChecks
from overt.guards.pgzero import PolicyZeroChecks
from overt.guards.satloss import SaturatedLossChecks
from overt.guards.distributed import DistributedChecks
from overt.guards.dropout import DropoutChecks
from overt.guards.adversary import AdversaryChecks
from overt.guards.emadecay import EmaDecayChecks
from overt.guards.optdef import OptimizerDefinitionChecks
from overt.guards.prunesign import PruneSignChecks
from overt.guards.quantsign import QuantSignChecks
from overt.guards.affinepair import AffinePairChecks
from overt.guards.residualskip import ResidualSkipChecks
from overt.guards.skipwrite import SkipWriteChecks
from overt.guards.samplegrad import SampleGradChecks
from overt.guards.scalefloor import ScaleFloorChecks
from overt.guards.evalcopy import EvalCopyChecks
from overt.guards.evaldata import EvalDataChecks
from overt.guards.evaldrop import EvalDropChecks
from overt.guards.evalscale import EvalScaleChecks
from overt.guards.evalwrites import EvalWriteChecks
from overt.guards.swapback import SwapBackChecks
from overt.guards.evalrepeat import EvalRepeatChecks
from overt.guards.evaledges import EvalEdgeChecks
from overt.guards.evaloverlap import EvalOverlapChecks
from overt.guards.evalloop import EvalLoopChecks
from overt.guards.foldequiv import FoldChecks
from overt.guards.forecast import ForecastChecks
from overt.guards.freezeattr import FreezeAttrChecks
from overt.guards.frozen import FrozenChecks
from overt.guards.frozenmoves import FrozenMoveChecks
from overt.guards.frozenmode import FrozenModeChecks
from overt.guards.grads import GradChecks
from overt.guards.wastedgrad import WastedGradChecks
from overt.guards.gridorder import GridOrderChecks
from overt.guards.gridrange import GridRangeChecks
from overt.guards.flatpick import FlatChoiceChecks
from overt.guards.fitkept import DivergedFitChecks
from overt.guards.labelresample import LabelResampleChecks
from overt.guards.sharedstats import SharedStatsChecks
from overt.guards.recompute import RecomputeChecks
from overt.guards.gradinv import GradLinearityChecks
from overt.guards.lengths import LengthChecks
from overt.guards.horizon import HorizonChecks
from overt.guards.schednever import ScheduleNeverStepped
from overt.guards.warmupend import WarmupEndChecks
from overt.guards.ignored import IgnoredLabelChecks
from overt.guards.independence import IndependenceChecks
from overt.guards.inputreach import InputReachChecks
from overt.guards.samecolumns import SameColumnChecks
from overt.guards.sameinputs import SameInputChecks
from overt.guards.labelsignal import LabelSignalChecks
from overt.guards.leak import TargetLeakChecks
from overt.guards.onetarget import OneTargetChecks
from overt.guards.outputlink import OutputLinkChecks
from overt.guards.predshape import PredictionShapeChecks
from overt.guards.graphs import GraphChecks
from overt.guards.graphbatch import GraphBatchChecks
from overt.guards.clipping import ClipOrderChecks
from overt.guards.losses import LossChecks
from overt.guards.lossconfig import LossConfigChecks
from overt.guards.lossdir import LossDirectionChecks
from overt.guards.mcsamples import McSampleChecks
from overt.guards.metricprobe import MetricProbeChecks
from overt.guards.returnprobe import ReturnRecursionChecks
from overt.guards.bootshift import BootShiftChecks
from overt.guards.statecarry import StateCarryChecks
from overt.guards.boxformat import BoxFormatChecks
from overt.guards.lrgroups import GroupsLeftBehind
from overt.guards.grouprates import GroupRates
from overt.guards.optrebuilt import OptimizerRebuilt
from overt.guards.modes import ModeChecks
from overt.guards.normstats import NormStatsChecks
from overt.guards.normscale import NormScaleChecks
from overt.guards.normfunc import NormFunctionChecks
from overt.guards.orders import OrderChecks
from overt.guards.padloss import PaddingLossChecks
from overt.guards.padrow import PaddingRowChecks
from overt.guards.padfill import PadFillChecks
from overt.guards.vocabids import VocabularyIdChecks
from overt.guards.posrows import PositionRowChecks
from overt.guards.precision import PrecisionChecks
from overt.guards.repeats import RepeatChecks
from overt.guards.roundfunc import RoundTripFunctionChecks
from overt.guards.roundtrip import RoundTripChecks
from overt.guards.samplers import SamplerChecks
from overt.guards.shardsplit import ShardSplitChecks
from overt.guards.epochorder import EpochOrderChecks
from overt.guards.scaler import ScalerChecks
from overt.guards.sameviews import SameViewsChecks
from overt.guards.selfloss import SelfLossChecks
from overt.guards.seqtargets import SequenceTargetChecks
from overt.guards.schedulers import SchedulerChecks
from overt.guards.skew import SkewChecks
from overt.guards.hiddentoken import HiddenTokenChecks
from overt.guards.firstresponse import FirstResponseChecks
from overt.guards.untrainedread import UntrainedReadChecks
from overt.guards.softtargets import SoftTargetChecks
from overt.guards.logitbound import LogitBoundChecks
from overt.guards.logdet import LogDetChecks  # noqa: F401  (out of the defaults: see CHECKS)
from overt.guards.shadow import ShadowChecks
from overt.guards.aggregate import AggregateChecks
from overt.guards.softmax_dim import SoftmaxDimChecks
from overt.guards.stale_eval import StaleEvalChecks
from overt.guards.states import StateChecks
from overt.guards.stopgrad import StopGradientChecks
from overt.guards.targetcopy import TargetCopyChecks
from overt.guards.termscale import TermScaleChecks
from overt.guards.whereweight import WhereWeightChecks
from overt.guards.maskpick import MaskPickChecks
from overt.guards.probtargets import ProbTargetChecks
from overt.guards.reducedmask import ReducedMaskChecks

CHECKS: tuple[type[Check], ...] = (
    GradChecks,
    WastedGradChecks,
    FrozenMoveChecks,
    ModeChecks,
    FrozenModeChecks,
    DropoutChecks,
    EvalWriteChecks,
    SwapBackChecks,
    EvalRepeatChecks,
    IndependenceChecks,
    CarriedStateChecks,
    StaleEvalChecks,
    McSampleChecks,
    NormStatsChecks,
    EmaDecayChecks,
    OptimizerDefinitionChecks,
    PruneSignChecks,
    QuantSignChecks,
    AffinePairChecks,
    ResidualSkipChecks,
    SkipWriteChecks,
    SampleGradChecks,
    ScaleFloorChecks,
    AdversaryChecks,
    EvalCopyChecks,
    ShadowChecks,
    AggregateChecks,
    EvalLoopChecks,
    FrozenChecks,
    RepeatChecks,
    FreezeAttrChecks,
    LossChecks,
    ClassWeightChecks,
    WhereWeightChecks,
    SequenceTargetChecks,
    ForecastChecks,
    TransformAxisChecks,
    GridOrderChecks,
    GridRangeChecks,
    FlatChoiceChecks,
    DivergedFitChecks,
    LabelResampleChecks,
    SharedStatsChecks,
    RecomputeChecks,
    GradLinearityChecks,
    LengthChecks,
    IgnoredLabelChecks,
    SelfLossChecks,
    LossDirectionChecks,
    LossConfigChecks,
    SameViewsChecks,
    SoftTargetChecks,
    LogitBoundChecks,
    LogDetChecks,
    StopGradientChecks,
    TermScaleChecks,
    DeadTermChecks,
    PolicyZeroChecks,
    SaturatedLossChecks,
    MaskPickChecks,
    ProbTargetChecks,
    ReducedMaskChecks,
    TargetCopyChecks,
    AttentionMaskChecks,
    PaddingLossChecks,
    PaddingRowChecks,
    PadFillChecks,
    VocabularyIdChecks,
    PositionRowChecks,
    LabelSignalChecks,
    InputReachChecks,
    SameColumnChecks,
    SameInputChecks,
    OneTargetChecks,
    TargetLeakChecks,
    SoftmaxDimChecks,
    AxisChecks,
    PredictionShapeChecks,
    MetricProbeChecks,
    ReturnRecursionChecks,
    BootShiftChecks,
    StateCarryChecks,
    BoxFormatChecks,
    CtcBlankChecks,
    OutputLinkChecks,
    GraphChecks,
    ActivationChecks,
    DataChecks,
    DataMutationChecks,
    EvalDataChecks,
    EvalDropChecks,
    EvalOverlapChecks,
    EvalEdgeChecks,
    GraphBatchChecks,
    AdapterInitChecks,
    FoldChecks,
    RoundTripChecks,
    CoverageChecks,
    SkewChecks,
    HiddenTokenChecks,
    FirstResponseChecks,
    UntrainedReadChecks,
    SamplerChecks,
    ShardSplitChecks,
    EpochOrderChecks,
    OrderChecks,
    ClipOrderChecks,
    ScalerChecks,
    PrecisionChecks,
    AutocastCacheChecks,
    SchedulerChecks,
    HorizonChecks,
    ScheduleNeverStepped,
    WarmupEndChecks,
    GroupsLeftBehind,
    GroupRates,
    OptimizerRebuilt,
    StateChecks,
    DistributedChecks,
    NormScaleChecks,
    NormFunctionChecks,
    RoundTripFunctionChecks,  # after NormFunctionChecks: it wraps a normaliser that one wrapped already
    EvalScaleChecks,  # last: its probes run when the forward ends, after the other checks' hooks are off
)
