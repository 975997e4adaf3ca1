// perftune LLVM step helper: a persistent process that holds one LLVM module and applies
// new-pass-manager pipelines to it, so that an environment step costs a few milliseconds
// instead of one `opt` process (parse + print) per step.
//
// Built on first use by perftune.targets.llvm._service against the system libLLVM-14:
//   c++ -O2 _helper.cpp $(llvm-config-14 --cxxflags --ldflags --libs) -o helper
//
// Protocol: one command per line on stdin, one reply line on stdout.
//   load PATH            parse .ll/.bc and make it the current module                   -> ok COUNT
//   apply PIPELINE       run a pipeline (opt -passes=... syntax) on the current module -> ok COUNT
//   trial PIPELINE       like apply, on a copy; the current module is unchanged          -> ok COUNT
//   count                instruction count (Module::getInstructionCount)                 -> ok COUNT
//   instcount            per-opcode counts                                               -> ok K=V ...
//   autophase            Autophase-style features                                        -> ok K=V ...
//   textsize             .text bytes of the object code of the current module            -> ok BYTES
//   textsize-of PIPELINE .text bytes after PIPELINE, on a copy                           -> ok BYTES
//   write PATH / writell PATH   bitcode / textual IR of the current module               -> ok
//   save NAME / restore NAME    keep / bring back an in-memory copy of the module       -> ok [COUNT]
//   drop NAME / clear    forget one / all saved copies                                   -> ok
//   verify               run the IR verifier                                             -> ok | err MSG
// Errors that leave the module intact answer "err MESSAGE" (one line). A crash ends the process;
// the Python side restarts it.

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/Analysis/CFG.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRPrintingPasses.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"

#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>

using namespace llvm;

namespace {

LLVMContext Ctx;
std::unique_ptr<Module> Current;
// Snapshots are bitcode with the use-list order preserved: passes walk use lists, so a copy made
// with CloneModule (which reorders them) can optimise differently from the original, and the
// count after "restore" + passes would not match an `opt` replay. Bitcode with use-list order
// reproduces the module exactly (it is what `opt -preserve-bc-uselistorder` relies on).
std::map<std::string, std::string> Saved;

std::string toBitcode(const Module &M) {
  std::string Buffer;
  raw_string_ostream OS(Buffer);
  WriteBitcodeToFile(M, OS, /*ShouldPreserveUseListOrder=*/true);
  OS.flush();
  return Buffer;
}

std::unique_ptr<Module> fromBitcode(const std::string &Buffer) {
  Expected<std::unique_ptr<Module>> M = parseBitcodeFile(MemoryBufferRef(Buffer, "snapshot"), Ctx);
  if (!M) {
    // Cannot happen for bitcode we wrote ourselves; make it loud rather than wrong.
    errs() << "snapshot does not parse: " << toString(M.takeError()) << "\n";
    std::abort();
  }
  return std::move(*M);
}

// An exact copy of M (see above).
std::unique_ptr<Module> exactCopy(const Module &M) { return fromBitcode(toBitcode(M)); }
std::unique_ptr<TargetMachine> TM;  // as `opt` builds it: from the module triple, default CPU

void reply(const std::string &Line) {
  // One line per reply: newlines inside messages would desynchronise the protocol.
  std::string Clean = Line;
  for (char &C : Clean)
    if (C == '\n' || C == '\r') C = ' ';
  std::fwrite(Clean.data(), 1, Clean.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void replyCount(const Module &M) { reply("ok " + std::to_string(M.getInstructionCount())); }

std::unique_ptr<TargetMachine> makeTargetMachine(const Module &M, bool ForCodegen) {
  Triple T(M.getTargetTriple());
  if (T.getArch() == Triple::UnknownArch) {
    if (!ForCodegen) return nullptr;  // `opt` runs such modules without a target machine
    T = Triple(sys::getDefaultTargetTriple());
  }
  std::string Err;
  const Target *Tgt = TargetRegistry::lookupTarget(T.getTriple(), Err);
  if (!Tgt) return nullptr;
  TargetOptions Options;
  return std::unique_ptr<TargetMachine>(Tgt->createTargetMachine(
      T.getTriple(), "", "", Options, None, None, CodeGenOpt::Default));
}

// Runs PIPELINE on M the way `opt -passes=PIPELINE` does: fresh analysis managers, the
// module's target machine, the default alias-analysis pipeline.
bool runPipeline(Module &M, StringRef Pipeline, std::string &ErrOut) {
  LoopAnalysisManager LAM;
  FunctionAnalysisManager FAM;
  CGSCCAnalysisManager CGAM;
  ModuleAnalysisManager MAM;
  PipelineTuningOptions PTO;
  PassBuilder PB(TM.get(), PTO);
  AAManager AA = PB.buildDefaultAAPipeline();
  FAM.registerPass([&] { return std::move(AA); });
  Triple T(M.getTargetTriple());
  TargetLibraryInfoImpl TLII(T);
  FAM.registerPass([&] { return TargetLibraryAnalysis(TLII); });
  PB.registerModuleAnalyses(MAM);
  PB.registerCGSCCAnalyses(CGAM);
  PB.registerFunctionAnalyses(FAM);
  PB.registerLoopAnalyses(LAM);
  PB.crossRegisterProxies(LAM, FAM, CGAM, MAM);
  ModulePassManager MPM;
  if (Error E = PB.parsePassPipeline(MPM, Pipeline)) {
    ErrOut = toString(std::move(E));
    return false;
  }
  MPM.run(M, MAM);
  return true;
}

bool textSize(const Module &M, uint64_t &Bytes, std::string &ErrOut) {
  std::unique_ptr<Module> Copy = exactCopy(M);
  std::unique_ptr<TargetMachine> CodegenTM = makeTargetMachine(*Copy, true);
  if (!CodegenTM) {
    ErrOut = "no code generator for target triple '" + M.getTargetTriple() + "'";
    return false;
  }
  if (Copy->getDataLayout().isDefault()) Copy->setDataLayout(CodegenTM->createDataLayout());
  SmallString<0> Buffer;
  raw_svector_ostream OS(Buffer);
  legacy::PassManager PM;
  if (CodegenTM->addPassesToEmitFile(PM, OS, nullptr, CGFT_ObjectFile)) {
    ErrOut = "the target cannot emit object files";
    return false;
  }
  PM.run(*Copy);
  auto Obj = object::ObjectFile::createObjectFile(MemoryBufferRef(Buffer.str(), "module.o"));
  if (!Obj) {
    ErrOut = toString(Obj.takeError());
    return false;
  }
  Bytes = 0;
  for (const object::SectionRef &S : (*Obj)->sections()) {
    Expected<StringRef> Name = S.getName();
    if (!Name) {
      consumeError(Name.takeError());
      continue;
    }
    if (*Name == ".text" || Name->startswith(".text.")) Bytes += S.getSize();
  }
  return true;
}

std::string instCount(const Module &M) {
  uint64_t Blocks = 0, Funcs = 0, Insts = 0;
  std::map<unsigned, uint64_t> ByOpcode;
  for (const Function &F : M) {
    if (F.isDeclaration()) continue;
    ++Funcs;
    for (const BasicBlock &BB : F) {
      ++Blocks;
      for (const Instruction &I : BB) {
        ++Insts;
        ++ByOpcode[I.getOpcode()];
      }
    }
  }
  std::string Out = "ok TotalInsts=" + std::to_string(Insts) + " TotalBlocks=" + std::to_string(Blocks) +
                    " TotalFuncs=" + std::to_string(Funcs);
  // Opcodes named as in Instruction.def (Ret, Br, ...), in definition order.
#define HANDLE_INST(N, OPC, CLASS) Out += std::string(" ") + #OPC + "=" + std::to_string(ByOpcode[N]);
#include "llvm/IR/Instruction.def"
  return Out;
}

// Program features in the spirit of Autophase (Huang et al., FCCM 2019): CFG shape, phi
// nodes, constants and a selection of opcode counts. Computed here from their definitions.
std::string autophase(const Module &M) {
  uint64_t BBNumArgsHi = 0, BBNumArgsLo = 0, onePred = 0, onePredOneSuc = 0, onePredTwoSuc = 0,
           oneSuccessor = 0, twoPred = 0, twoPredOneSuc = 0, twoEach = 0, twoSuccessor = 0,
           morePreds = 0, BB03Phi = 0, BBHiPhi = 0, BBNoPhi = 0, BeginPhi = 0, BranchCount = 0,
           returnInt = 0, CriticalCount = 0, NumEdges = 0, const32Bit = 0, const64Bit = 0,
           numConstZeroes = 0, numConstOnes = 0, UncondBranches = 0, binaryConstArg = 0, BlockMid = 0,
           BlockLow = 0, TotalBlocks = 0, TotalInsts = 0, TotalMemInst = 0, TotalFuncs = 0, ArgsPhi = 0,
           testUnary = 0;
  std::map<unsigned, uint64_t> Op;
  for (const Function &F : M) {
    if (F.isDeclaration()) continue;
    ++TotalFuncs;
    for (const BasicBlock &BB : F) {
      ++TotalBlocks;
      unsigned NPred = 0, NSucc = 0;
      for (const BasicBlock *P : predecessors(&BB)) {
        (void)P;
        ++NPred;
      }
      const Instruction *Term = BB.getTerminator();
      if (Term) NSucc = Term->getNumSuccessors();
      NumEdges += NSucc;
      if (Term && NSucc > 1)
        for (unsigned S = 0; S < NSucc; ++S)
          if (isCriticalEdge(Term, S)) ++CriticalCount;
      if (NPred == 1) ++onePred;
      else if (NPred == 2) ++twoPred;
      else if (NPred > 2) ++morePreds;
      if (NSucc == 1) ++oneSuccessor;
      else if (NSucc == 2) ++twoSuccessor;
      if (NPred == 1 && NSucc == 1) ++onePredOneSuc;
      if (NPred == 1 && NSucc == 2) ++onePredTwoSuc;
      if (NPred == 2 && NSucc == 1) ++twoPredOneSuc;
      if (NPred == 2 && NSucc == 2) ++twoEach;
      uint64_t Phis = 0, PhiArgs = 0, InBlock = 0;
      bool First = true;
      for (const Instruction &I : BB) {
        ++TotalInsts;
        ++InBlock;
        ++Op[I.getOpcode()];
        if (I.mayReadOrWriteMemory()) ++TotalMemInst;
        if (const auto *Br = dyn_cast<BranchInst>(&I)) {
          ++BranchCount;
          if (Br->isUnconditional()) ++UncondBranches;
        }
        if (const auto *Call = dyn_cast<CallInst>(&I))
          if (const Function *Callee = Call->getCalledFunction())
            if (Callee->getReturnType()->isIntegerTy()) ++returnInt;
        if (isa<UnaryInstruction>(I)) ++testUnary;
        if (isa<BinaryOperator>(I) && (isa<Constant>(I.getOperand(0)) || isa<Constant>(I.getOperand(1))))
          ++binaryConstArg;
        if (const auto *Phi = dyn_cast<PHINode>(&I)) {
          if (First) ++BeginPhi;
          ++Phis;
          PhiArgs += Phi->getNumIncomingValues();
        }
        First = false;
        for (const Use &U : I.operands())
          if (const auto *CI = dyn_cast<ConstantInt>(U.get())) {
            unsigned W = CI->getBitWidth();
            if (W == 32) ++const32Bit;
            if (W == 64) ++const64Bit;
            if (CI->isZero()) ++numConstZeroes;
            if (CI->isOne()) ++numConstOnes;
          }
      }
      ArgsPhi += PhiArgs;
      if (Phis == 0) ++BBNoPhi;
      else if (Phis <= 3) ++BB03Phi;
      else ++BBHiPhi;
      if (PhiArgs > 5) ++BBNumArgsHi;
      else if (PhiArgs >= 1) ++BBNumArgsLo;
      if (InBlock < 15) ++BlockLow;
      else if (InBlock <= 500) ++BlockMid;
    }
  }
  std::string Out = "ok";
  auto Add = [&](const char *K, uint64_t V) { Out += std::string(" ") + K + "=" + std::to_string(V); };
  Add("BBNumArgsHi", BBNumArgsHi); Add("BBNumArgsLo", BBNumArgsLo); Add("onePred", onePred);
  Add("onePredOneSuc", onePredOneSuc); Add("onePredTwoSuc", onePredTwoSuc); Add("oneSuccessor", oneSuccessor);
  Add("twoPred", twoPred); Add("twoPredOneSuc", twoPredOneSuc); Add("twoEach", twoEach);
  Add("twoSuccessor", twoSuccessor); Add("morePreds", morePreds); Add("BB03Phi", BB03Phi);
  Add("BBHiPhi", BBHiPhi); Add("BBNoPhi", BBNoPhi); Add("BeginPhi", BeginPhi); Add("BranchCount", BranchCount);
  Add("returnInt", returnInt); Add("CriticalCount", CriticalCount); Add("NumEdges", NumEdges);
  Add("const32Bit", const32Bit); Add("const64Bit", const64Bit); Add("numConstZeroes", numConstZeroes);
  Add("numConstOnes", numConstOnes); Add("UncondBranches", UncondBranches); Add("binaryConstArg", binaryConstArg);
  Add("NumAShrInst", Op[Instruction::AShr]); Add("NumAddInst", Op[Instruction::Add]);
  Add("NumAllocaInst", Op[Instruction::Alloca]); Add("NumAndInst", Op[Instruction::And]);
  Add("BlockMid", BlockMid); Add("BlockLow", BlockLow); Add("NumBitCastInst", Op[Instruction::BitCast]);
  Add("NumBrInst", Op[Instruction::Br]); Add("NumCallInst", Op[Instruction::Call]);
  Add("NumGetElementPtrInst", Op[Instruction::GetElementPtr]); Add("NumICmpInst", Op[Instruction::ICmp]);
  Add("NumLShrInst", Op[Instruction::LShr]); Add("NumLoadInst", Op[Instruction::Load]);
  Add("NumMulInst", Op[Instruction::Mul]); Add("NumOrInst", Op[Instruction::Or]);
  Add("NumPHIInst", Op[Instruction::PHI]); Add("NumRetInst", Op[Instruction::Ret]);
  Add("NumSExtInst", Op[Instruction::SExt]); Add("NumSelectInst", Op[Instruction::Select]);
  Add("NumShlInst", Op[Instruction::Shl]); Add("NumStoreInst", Op[Instruction::Store]);
  Add("NumSubInst", Op[Instruction::Sub]); Add("NumTruncInst", Op[Instruction::Trunc]);
  Add("NumXorInst", Op[Instruction::Xor]); Add("NumZExtInst", Op[Instruction::ZExt]);
  Add("TotalBlocks", TotalBlocks); Add("TotalInsts", TotalInsts); Add("TotalMemInst", TotalMemInst);
  Add("TotalFuncs", TotalFuncs); Add("ArgsPhi", ArgsPhi); Add("testUnary", testUnary);
  return Out;
}

void handle(const std::string &Cmd, const std::string &Arg) {
  std::string Err;
  if (Cmd == "load") {
    SMDiagnostic Diag;
    std::unique_ptr<Module> M = parseIRFile(Arg, Diag, Ctx);
    if (!M) {
      std::string Msg;
      raw_string_ostream OS(Msg);
      Diag.print("", OS, false);
      OS.flush();
      reply("err " + Msg);
      return;
    }
    if (verifyModule(*M, &errs())) {
      reply("err " + Arg + ": the module is not valid LLVM IR (verifier failed)");
      return;
    }
    Current = std::move(M);
    TM = makeTargetMachine(*Current, false);
    replyCount(*Current);
    return;
  }
  if (Cmd == "quit") std::exit(0);
  if (!Current) {
    reply("err no module loaded");
    return;
  }
  if (Cmd == "apply") {
    if (!runPipeline(*Current, Arg, Err)) return reply("err " + Err);
    return replyCount(*Current);
  }
  if (Cmd == "trial") {
    std::unique_ptr<Module> Copy = exactCopy(*Current);
    if (!runPipeline(*Copy, Arg, Err)) return reply("err " + Err);
    return replyCount(*Copy);
  }
  if (Cmd == "count") return replyCount(*Current);
  if (Cmd == "instcount") return reply(instCount(*Current));
  if (Cmd == "autophase") return reply(autophase(*Current));
  if (Cmd == "textsize" || Cmd == "textsize-of") {
    std::unique_ptr<Module> Copy;
    const Module *Target = Current.get();
    if (Cmd == "textsize-of") {
      Copy = exactCopy(*Current);
      if (!runPipeline(*Copy, Arg, Err)) return reply("err " + Err);
      Target = Copy.get();
    }
    uint64_t Bytes = 0;
    if (!textSize(*Target, Bytes, Err)) return reply("err " + Err);
    return reply("ok " + std::to_string(Bytes));
  }
  if (Cmd == "write" || Cmd == "writell") {
    std::error_code EC;
    raw_fd_ostream OS(Arg, EC);
    if (EC) return reply("err " + Arg + ": " + EC.message());
    if (Cmd == "write") WriteBitcodeToFile(*Current, OS, /*ShouldPreserveUseListOrder=*/true);
    else Current->print(OS, nullptr);
    OS.close();
    return reply("ok");
  }
  if (Cmd == "save") {
    Saved[Arg] = toBitcode(*Current);
    return reply("ok");
  }
  if (Cmd == "restore") {
    auto It = Saved.find(Arg);
    if (It == Saved.end()) return reply("err no saved module named '" + Arg + "'");
    Current = fromBitcode(It->second);
    return replyCount(*Current);
  }
  if (Cmd == "clear") {
    Saved.clear();
    return reply("ok");
  }
  if (Cmd == "drop") {
    Saved.erase(Arg);
    return reply("ok");
  }
  if (Cmd == "verify") {
    std::string Msg;
    raw_string_ostream OS(Msg);
    if (verifyModule(*Current, &OS)) {
      OS.flush();
      return reply("err " + Msg);
    }
    return reply("ok");
  }
  reply("err unknown command '" + Cmd + "'");
}

}  // namespace

// argv[1], when given, is the folder of the Python engine that started this process: its files are
// removed when stdin reaches end of file, which happens only when that engine's process is gone without
// closing the engine (killed, or a worker terminated by a vector environment). "quit" leaves them to it.
int main(int argc, char **argv) {
  InitializeAllTargetInfos();
  InitializeAllTargets();
  InitializeAllTargetMCs();
  InitializeAllAsmPrinters();
  std::ios::sync_with_stdio(false);
  std::string Line;
  reply("ready perftune-llvm-helper 1");
  while (std::getline(std::cin, Line)) {
    size_t Space = Line.find(' ');
    std::string Cmd = Line.substr(0, Space);
    std::string Arg = Space == std::string::npos ? "" : Line.substr(Space + 1);
    handle(Cmd, Arg);
  }
  if (argc > 1)
    sys::fs::remove_directories(argv[1], /*IgnoreErrors=*/true);
  return 0;
}
