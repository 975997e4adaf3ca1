/* Deliberately bad candidates for the sandbox tests: MODE selects the misbehaviour. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "ok";
    if (!strcmp(mode, "ok")) { puts("result 42"); return 0; }
    if (!strcmp(mode, "segv")) { volatile int *p = NULL; *p = 1; return 0; }
    if (!strcmp(mode, "hang")) { for (;;) pause(); }
    if (!strcmp(mode, "alloc")) {  /* 100 GB, touched 100 MB at a time */
        for (long i = 0; i < 1000; i++) {
            char *p = malloc(100L << 20);
            if (!p) { fprintf(stderr, "malloc failed\n"); return 3; }
            memset(p, 1, 100L << 20);
        }
        return 0;
    }
    if (!strcmp(mode, "forkbomb")) { for (;;) fork(); }
    if (!strcmp(mode, "disk")) {  /* at most 1 GB in 8 MB files, in the scratch directory */
        static char buf[1 << 20];
        memset(buf, 'x', sizeof buf);
        for (int f = 0; f < 128; f++) {
            char name[64];
            snprintf(name, sizeof name, "fill%03d", f);
            FILE *out = fopen(name, "wb");
            if (!out) return 4;
            for (int i = 0; i < 8; i++) fwrite(buf, 1, sizeof buf, out);
            fclose(out);
        }
        return 0;
    }
    if (!strcmp(mode, "escape")) {
        FILE *out = fopen(argc > 2 ? argv[2] : "/tmp/perftune-escape-test", "w");
        if (!out) { perror("fopen"); return 5; }
        fputs("escaped\n", out);
        fclose(out);
        return 0;
    }
    if (!strcmp(mode, "exit7")) { fputs("something went wrong\n", stderr); return 7; }
    if (!strcmp(mode, "spew")) { for (long i = 0; i < 20000000; i++) fputs("yyyyyyyyy\n", stdout); return 0; }
    return 2;
}
