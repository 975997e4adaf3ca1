#!/bin/sh
# A compiler that crashes like an internal compiler error whenever -funroll-all-loops is given for a
# real build (the flag probe, which compiles probe.c, is answered normally). Everything else is gcc.
case " $* " in
  *probe.c*) exec gcc "$@" ;;
  *" -funroll-all-loops "*)
    echo "during RTL pass: loop2_unroll" >&2
    echo "kahan.c:9:5: internal compiler error: Segmentation fault" >&2
    echo "Please submit a full bug report, with preprocessed source (by using -freport-bug)." >&2
    exit 4 ;;
esac
exec gcc "$@"
