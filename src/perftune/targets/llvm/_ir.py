"""Counting instructions in textual LLVM IR, for the ``opt`` fallback engine.

LLVM 14 prints every instruction of a function body on its own line indented by two spaces;
switch cases, ``invoke``'s ``to label`` part and landing-pad clauses are continuation lines
indented further, labels start at column 0. That makes ``Module::getInstructionCount`` a line
count, which the tests check against the helper on many modules.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["INSTCOUNT_NAMES", "count_instructions", "opcode_counts"]

# Instruction.def names (as the helper reports them) and the opcode as printed in IR.
_OPCODES: list[tuple[str, str]] = [
    ("Ret", "ret"),
    ("Br", "br"),
    ("Switch", "switch"),
    ("IndirectBr", "indirectbr"),
    ("Invoke", "invoke"),
    ("Resume", "resume"),
    ("Unreachable", "unreachable"),
    ("CleanupRet", "cleanupret"),
    ("CatchRet", "catchret"),
    ("CatchSwitch", "catchswitch"),
    ("CallBr", "callbr"),
    ("FNeg", "fneg"),
    ("Add", "add"),
    ("FAdd", "fadd"),
    ("Sub", "sub"),
    ("FSub", "fsub"),
    ("Mul", "mul"),
    ("FMul", "fmul"),
    ("UDiv", "udiv"),
    ("SDiv", "sdiv"),
    ("FDiv", "fdiv"),
    ("URem", "urem"),
    ("SRem", "srem"),
    ("FRem", "frem"),
    ("Shl", "shl"),
    ("LShr", "lshr"),
    ("AShr", "ashr"),
    ("And", "and"),
    ("Or", "or"),
    ("Xor", "xor"),
    ("Alloca", "alloca"),
    ("Load", "load"),
    ("Store", "store"),
    ("GetElementPtr", "getelementptr"),
    ("Fence", "fence"),
    ("AtomicCmpXchg", "cmpxchg"),
    ("AtomicRMW", "atomicrmw"),
    ("Trunc", "trunc"),
    ("ZExt", "zext"),
    ("SExt", "sext"),
    ("FPToUI", "fptoui"),
    ("FPToSI", "fptosi"),
    ("UIToFP", "uitofp"),
    ("SIToFP", "sitofp"),
    ("FPTrunc", "fptrunc"),
    ("FPExt", "fpext"),
    ("PtrToInt", "ptrtoint"),
    ("IntToPtr", "inttoptr"),
    ("BitCast", "bitcast"),
    ("AddrSpaceCast", "addrspacecast"),
    ("CleanupPad", "cleanuppad"),
    ("CatchPad", "catchpad"),
    ("ICmp", "icmp"),
    ("FCmp", "fcmp"),
    ("PHI", "phi"),
    ("Call", "call"),
    ("Select", "select"),
    ("UserOp1", "<userop1>"),
    ("UserOp2", "<userop2>"),
    ("VAArg", "va_arg"),
    ("ExtractElement", "extractelement"),
    ("InsertElement", "insertelement"),
    ("ShuffleVector", "shufflevector"),
    ("ExtractValue", "extractvalue"),
    ("InsertValue", "insertvalue"),
    ("LandingPad", "landingpad"),
    ("Freeze", "freeze"),
]

#: The InstCount observation's names, in order: totals, then one count per opcode.
INSTCOUNT_NAMES: tuple[str, ...] = ("TotalInsts", "TotalBlocks", "TotalFuncs") + tuple(d for d, _ in _OPCODES)

_BY_TEXT = {t: d for d, t in _OPCODES}
_ASSIGN = re.compile(r'^\s+(?:%[-\w.$]+|%"[^"]*")\s*=\s*')
_CALL_PREFIX = {"tail", "musttail", "notail"}


def _body_lines(ir: str):
    in_body = False
    for line in ir.splitlines():
        if not in_body:
            if line.startswith("define ") and line.rstrip().endswith("{"):
                in_body = True
            continue
        if line.startswith("}"):
            in_body = False
            continue
        yield line


def _is_instruction(line: str) -> bool:
    # "uselistorder" directives (opt -preserve-ll-uselistorder) are not instructions.
    return (
        len(line) > 2
        and line[0] == " "
        and line[1] == " "
        and line[2] not in " ;]"
        and not line.startswith("  uselistorder")
    )


def count_instructions(ir: str) -> int:
    """``Module::getInstructionCount()`` of a module printed by LLVM 14."""
    return sum(1 for line in _body_lines(ir) if _is_instruction(line))


def opcode_counts(ir: str) -> dict[str, int]:
    """The InstCount observation (see :data:`INSTCOUNT_NAMES`) computed from IR text."""
    counts: Counter[str] = Counter()
    blocks = funcs = 0
    previous_was_label = True
    for line in ir.splitlines():
        if line.startswith("define ") and line.rstrip().endswith("{"):
            funcs += 1
    for line in _body_lines(ir):
        if not _is_instruction(line):
            if line and line[0] not in " ;":
                previous_was_label = True  # an explicit label starts a block
            continue
        if previous_was_label:
            blocks += 1
            previous_was_label = False
        text = _ASSIGN.sub("", line, count=1).strip()
        words = text.split(None, 2)
        op = words[0]
        if op in _CALL_PREFIX and len(words) > 1:
            op = words[1]
        counts[_BY_TEXT.get(op, op)] += 1
        if op in (
            "ret",
            "br",
            "switch",
            "indirectbr",
            "invoke",
            "resume",
            "unreachable",
            "cleanupret",
            "catchret",
            "catchswitch",
            "callbr",
        ):
            previous_was_label = True  # a terminator ends a block
    result = {"TotalInsts": sum(counts.values()), "TotalBlocks": blocks, "TotalFuncs": funcs}
    for name, _ in _OPCODES:
        result[name] = counts.get(name, 0)
    return result
