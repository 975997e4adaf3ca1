"""The action space: CompilerGym's 124 LLVM-10 passes, mapped onto LLVM 14's new pass manager.

CompilerGym's ``llvm-v0`` action space is a list of 124 legacy ``opt`` flags. LLVM 14's new pass
manager names most of them the same, some need a nesting (a loop pass runs inside
``function(loop(...))``, a CGSCC pass inside ``cgscc(...)``), a few were renamed, and six have no
new-pass-manager counterpart any more. ``ACTIONS`` holds the 118 that map, in CompilerGym's order;
``UNMAPPED`` the six that do not, with the reason. docs/llvm-actions.md is the readable version.

Example:
    >>> from perftune.targets.llvm import ACTIONS
    >>> len(ACTIONS), ACTIONS[0].flag, ACTIONS[0].pipeline
    (118, '-add-discriminators', 'function(add-discriminators)')
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ACTIONS", "COMPILERGYM_FLAGS", "UNMAPPED", "Action", "action_index", "pipeline_of"]


@dataclass(frozen=True)
class Action:
    """One pass of the action space.

    Attributes:
        flag: CompilerGym's (legacy ``opt``) flag, e.g. ``"-licm"``.
        pipeline: The LLVM 14 new-pass-manager pipeline text, e.g. ``"function(loop-mssa(licm))"``.
        description: What the pass does, in a few words.
    """

    flag: str
    pipeline: str
    description: str

    @property
    def name(self) -> str:
        """The flag without its dash (``"licm"``)."""
        return self.flag.lstrip("-")


def _f(p: str) -> str:
    return f"function({p})"


def _loop(p: str) -> str:
    return f"function(loop({p}))"


def _loop_mssa(p: str) -> str:
    return f"function(loop-mssa({p}))"


def _cgscc(p: str) -> str:
    return f"cgscc({p})"


# (flag, new-PM pipeline or None, description); CompilerGym's order.
_TABLE: list[tuple[str, str | None, str]] = [
    ("-add-discriminators", _f("add-discriminators"), "Add DWARF path discriminators"),
    ("-adce", _f("adce"), "Aggressive dead code elimination"),
    ("-aggressive-instcombine", _f("aggressive-instcombine"), "Combine pattern-based expressions"),
    ("-alignment-from-assumptions", _f("alignment-from-assumptions"), "Alignment from assumptions"),
    ("-always-inline", "always-inline", "Inline always_inline functions"),
    ("-argpromotion", _cgscc("argpromotion"), "Promote by-reference arguments to scalars"),
    ("-attributor", "attributor", "Deduce and propagate attributes"),
    ("-barrier", None, "A no-op barrier pass (legacy pass manager only)"),
    ("-bdce", _f("bdce"), "Bit-tracking dead code elimination"),
    ("-break-crit-edges", _f("break-crit-edges"), "Break critical edges in the CFG"),
    ("-simplifycfg", _f("simplifycfg"), "Simplify the CFG"),
    ("-callsite-splitting", _f("callsite-splitting"), "Call-site splitting"),
    ("-called-value-propagation", "called-value-propagation", "Called value propagation"),
    ("-canonicalize-aliases", "canonicalize-aliases", "Canonicalize aliases"),
    ("-consthoist", _f("consthoist"), "Constant hoisting"),
    ("-constmerge", "constmerge", "Merge duplicate global constants"),
    ("-constprop", None, "Simple constant propagation (removed in LLVM 12; instsimplify covers it)"),
    ("-coro-cleanup", _f("coro-cleanup"), "Lower all coroutine-related intrinsics"),
    ("-coro-early", _f("coro-early"), "Lower early coroutine intrinsics"),
    ("-coro-elide", _f("coro-elide"), "Coroutine frame allocation elision"),
    ("-coro-split", _cgscc("coro-split"), "Split coroutines into their state-machine functions"),
    ("-correlated-propagation", _f("correlated-propagation"), "Value propagation"),
    ("-cross-dso-cfi", "cross-dso-cfi", "Cross-DSO CFI"),
    ("-deadargelim", "deadargelim", "Dead argument elimination"),
    ("-dce", _f("dce"), "Dead code elimination"),
    ("-die", None, "Dead instruction elimination (removed in LLVM 13; dce covers it)"),
    ("-dse", _f("dse"), "Dead store elimination"),
    ("-reg2mem", _f("reg2mem"), "Demote all values to stack slots"),
    ("-div-rem-pairs", _f("div-rem-pairs"), "Hoist/decompose integer division and remainder"),
    ("-early-cse-memssa", _f("early-cse<memssa>"), "Early CSE with MemorySSA"),
    ("-early-cse", _f("early-cse"), "Early CSE"),
    ("-elim-avail-extern", "elim-avail-extern", "Eliminate available-externally globals"),
    ("-ee-instrument", _f("ee-instrument"), "Instrument function entry/exit (pre-inlining)"),
    ("-flattencfg", _f("flattencfg"), "Flatten the CFG"),
    ("-float2int", _f("float2int"), "Float to int"),
    ("-forceattrs", "forceattrs", "Force set function attributes"),
    ("-inline", _cgscc("inline"), "Function integration/inlining"),
    ("-insert-gcov-profiling", "insert-gcov-profiling", "Insert instrumentation for GCOV profiling"),
    ("-gvn-hoist", _f("gvn-hoist"), "Early GVN hoisting of expressions"),
    ("-gvn", _f("gvn"), "Global value numbering"),
    ("-globaldce", "globaldce", "Dead global elimination"),
    ("-globalopt", "globalopt", "Global variable optimizer"),
    ("-globalsplit", "globalsplit", "Global splitter"),
    ("-guard-widening", _f("guard-widening"), "Widen guards"),
    ("-hotcoldsplit", "hotcoldsplit", "Hot/cold splitting"),
    ("-ipconstprop", None, "Interprocedural constant propagation (removed in LLVM 12; ipsccp covers it)"),
    ("-ipsccp", "ipsccp", "Interprocedural sparse conditional constant propagation"),
    ("-indvars", _loop("indvars"), "Induction variable simplification"),
    ("-irce", _f("irce"), "Inductive range check elimination"),
    ("-infer-address-spaces", _f("infer-address-spaces"), "Infer address spaces"),
    ("-inferattrs", "inferattrs", "Infer function attributes"),
    ("-inject-tli-mappings", _f("inject-tli-mappings"), "Inject TLI mappings"),
    ("-instsimplify", _f("instsimplify"), "Remove redundant instructions"),
    ("-instcombine", _f("instcombine"), "Combine redundant instructions"),
    ("-instnamer", _f("instnamer"), "Assign names to anonymous instructions"),
    ("-jump-threading", _f("jump-threading"), "Jump threading"),
    ("-lcssa", _f("lcssa"), "Loop-closed SSA form"),
    ("-licm", _loop_mssa("licm"), "Loop invariant code motion"),
    ("-libcalls-shrinkwrap", _f("libcalls-shrinkwrap"), "Conditionally eliminate dead library calls"),
    ("-load-store-vectorizer", _f("load-store-vectorizer"), "Vectorize loads and stores"),
    ("-loop-data-prefetch", _f("loop-data-prefetch"), "Loop data prefetch"),
    ("-loop-deletion", _loop("loop-deletion"), "Delete dead loops"),
    ("-loop-distribute", _f("loop-distribute"), "Loop distribution"),
    ("-loop-fusion", _f("loop-fusion"), "Loop fusion"),
    ("-loop-guard-widening", _loop("guard-widening"), "Widen guards within a single loop"),
    ("-loop-idiom", _loop("loop-idiom"), "Recognize loop idioms"),
    ("-loop-instsimplify", _loop("loop-instsimplify"), "Simplify instructions in loops"),
    ("-loop-interchange", _loop("loop-interchange"), "Interchange loops for cache reuse"),
    ("-loop-load-elim", _f("loop-load-elim"), "Loop load elimination"),
    ("-loop-predication", _loop("loop-predication"), "Loop predication"),
    ("-loop-reroll", _loop("loop-reroll"), "Reroll loops"),
    ("-loop-rotate", _loop("loop-rotate"), "Rotate loops"),
    ("-loop-simplifycfg", _loop("loop-simplifycfg"), "Simplify the loop CFG"),
    ("-loop-simplify", _f("loop-simplify"), "Canonicalize natural loops"),
    ("-loop-sink", _f("loop-sink"), "Loop sink"),
    ("-loop-reduce", _loop("loop-reduce"), "Loop strength reduction"),
    ("-loop-unroll-and-jam", _loop("loop-unroll-and-jam"), "Unroll and jam loops"),
    ("-loop-unroll", _f("loop-unroll"), "Unroll loops"),
    ("-loop-unswitch", None, "Unswitch loops (legacy pass manager only; see -simple-loop-unswitch)"),
    ("-loop-vectorize", _f("loop-vectorize"), "Loop vectorization"),
    ("-loop-versioning-licm", _loop("loop-versioning-licm"), "Loop versioning for LICM"),
    ("-loop-versioning", _f("loop-versioning"), "Loop versioning"),
    ("-loweratomic", _f("loweratomic"), "Lower atomic intrinsics to non-atomic form"),
    ("-lower-constant-intrinsics", _f("lower-constant-intrinsics"), "Lower constant intrinsics"),
    ("-lower-expect", _f("lower-expect"), "Lower 'expect' intrinsics"),
    ("-lower-guard-intrinsic", _f("lower-guard-intrinsic"), "Lower the guard intrinsic to control flow"),
    ("-lowerinvoke", _f("lowerinvoke"), "Lower invoke and unwind, for unwindless code generators"),
    ("-lower-matrix-intrinsics", _f("lower-matrix-intrinsics"), "Lower the matrix intrinsics"),
    ("-lowerswitch", _f("lowerswitch"), "Lower switch instructions to branches"),
    ("-lower-widenable-condition", _f("lower-widenable-condition"), "Lower the widenable condition to true"),
    ("-memcpyopt", _f("memcpyopt"), "MemCpy optimization"),
    ("-mergefunc", "mergefunc", "Merge functions"),
    ("-mergeicmps", _f("mergeicmps"), "Merge contiguous icmps into a memcmp"),
    ("-mldst-motion", _f("mldst-motion"), "Merged load/store motion"),
    ("-sancov", "sancov-module", "Sanitizer coverage instrumentation"),
    ("-name-anon-globals", "name-anon-globals", "Provide a name to nameless globals"),
    ("-nary-reassociate", _f("nary-reassociate"), "N-ary reassociation"),
    ("-newgvn", _f("newgvn"), "Global value numbering (NewGVN)"),
    ("-pgo-memop-opt", _f("pgo-memop-opt"), "Optimize memory intrinsics by their size profile"),
    ("-partial-inliner", "partial-inliner", "Partial inliner"),
    ("-partially-inline-libcalls", _f("partially-inline-libcalls"), "Partially inline library calls"),
    (
        "-post-inline-ee-instrument",
        _f("ee-instrument<post-inline>"),
        "Instrument function entry/exit (post-inlining)",
    ),
    ("-functionattrs", _cgscc("function-attrs"), "Deduce function attributes"),
    ("-mem2reg", _f("mem2reg"), "Promote memory to register"),
    ("-prune-eh", None, "Remove unused exception handling info (legacy pass manager only)"),
    ("-reassociate", _f("reassociate"), "Reassociate expressions"),
    ("-redundant-dbg-inst-elim", _f("redundant-dbg-inst-elim"), "Redundant debug instruction elimination"),
    ("-rpo-functionattrs", "rpo-function-attrs", "Deduce function attributes in RPO"),
    ("-rewrite-statepoints-for-gc", "rewrite-statepoints-for-gc", "Make relocations explicit at statepoints"),
    ("-sccp", _f("sccp"), "Sparse conditional constant propagation"),
    ("-slp-vectorizer", _f("slp-vectorizer"), "SLP vectorizer"),
    ("-sroa", _f("sroa"), "Scalar replacement of aggregates"),
    ("-scalarizer", _f("scalarizer"), "Scalarize vector operations"),
    ("-separate-const-offset-from-gep", _f("separate-const-offset-from-gep"), "Split GEPs for better CSE"),
    ("-simple-loop-unswitch", _loop("simple-loop-unswitch"), "Simple loop unswitching"),
    ("-sink", _f("sink"), "Code sinking"),
    ("-speculative-execution", _f("speculative-execution"), "Speculatively execute instructions"),
    ("-slsr", _f("slsr"), "Straight-line strength reduction"),
    ("-strip-dead-prototypes", "strip-dead-prototypes", "Strip unused function prototypes"),
    ("-strip-debug-declare", "strip-debug-declare", "Strip all llvm.dbg.declare intrinsics"),
    ("-strip-nondebug", "strip-nondebug", "Strip all symbols, except debug symbols"),
    ("-strip", "strip", "Strip all symbols from a module"),
    ("-tailcallelim", _f("tailcallelim"), "Tail call elimination"),
    ("-mergereturn", _f("mergereturn"), "Unify function exit nodes"),
]

#: CompilerGym's 124 flags, in its order.
COMPILERGYM_FLAGS: tuple[str, ...] = tuple(flag for flag, _, _ in _TABLE)

#: The 118 actions that map onto LLVM 14, in CompilerGym's order.
ACTIONS: tuple[Action, ...] = tuple(Action(flag, p, d) for flag, p, d in _TABLE if p is not None)

#: The CompilerGym flags without an LLVM 14 new-pass-manager counterpart, with the reason.
UNMAPPED: dict[str, str] = {flag: d for flag, p, d in _TABLE if p is None}

_INDEX = {a.flag: i for i, a in enumerate(ACTIONS)} | {a.name: i for i, a in enumerate(ACTIONS)}


def action_index(name: str) -> int:
    """Index of an action given as ``"-licm"``, ``"licm"`` or a decimal index.

    Raises:
        ValueError: The name is not an action (the message says why, e.g. unmapped in LLVM 14).
    """
    if name in _INDEX:
        return _INDEX[name]
    if name.isdigit() and int(name) < len(ACTIONS):
        return int(name)
    flag = name if name.startswith("-") else f"-{name}"
    if flag in UNMAPPED:
        raise ValueError(f"action {name!r} has no LLVM 14 counterpart: {UNMAPPED[flag]}")
    raise ValueError(
        f"unknown action {name!r}: expected one of the {len(ACTIONS)} flags such as '-instcombine'"
    )


def pipeline_of(actions: list[int] | tuple[int, ...]) -> str:
    """The ``opt -passes=`` text that applies the given actions in order."""
    return ",".join(ACTIONS[i].pipeline for i in actions)
