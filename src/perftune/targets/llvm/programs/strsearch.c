/* String processing: Boyer-Moore-Horspool search, word frequency hashing and run-length coding.
 * Usage: strsearch [KBYTES]   (written for perftune; MIT licence) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *words[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
                              "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi"};

static long horspool(const char *text, long n, const char *pat) {
    long m = (long)strlen(pat), count = 0;
    long shift[256];
    for (int i = 0; i < 256; i++) shift[i] = m;
    for (long i = 0; i < m - 1; i++) shift[(unsigned char)pat[i]] = m - 1 - i;
    for (long i = 0; i + m <= n;) {
        long j = m - 1;
        while (j >= 0 && text[i + j] == pat[j]) j--;
        if (j < 0) count++;
        i += shift[(unsigned char)text[i + m - 1]];
    }
    return count;
}

static unsigned hash(const char *s, long n) {
    unsigned h = 2166136261u;
    for (long i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

int main(int argc, char **argv) {
    long n = (long)(argc > 1 ? atoi(argv[1]) : 512) * 1024;
    char *text = malloc((size_t)n + 1);
    if (!text) return 1;
    unsigned s = 7u;
    long len = 0;
    while (len < n) {
        s = s * 1664525u + 1013904223u;
        const char *w = words[(s >> 12) % 16];
        for (const char *p = w; *p && len < n; p++) text[len++] = *p;
        if (len < n) text[len++] = ((s >> 20) % 7 == 0) ? '\n' : ' ';
    }
    text[n] = 0;
    unsigned table[64] = {0};
    long start = 0;
    for (long i = 0; i <= n; i++)
        if (i == n || text[i] == ' ' || text[i] == '\n') {
            if (i > start) table[hash(text + start, i - start) % 64]++;
            start = i + 1;
        }
    unsigned mix = 0;
    for (int i = 0; i < 64; i++) mix = mix * 31u + table[i];
    long runs = 0;
    for (long i = 1; i < n; i++) runs += text[i] != text[i - 1];
    printf("theta %ld\nomicron %ld\nmix %u\nruns %ld\n", horspool(text, n, "theta"),
           horspool(text, n, "omicron pi"), mix, runs);
    free(text);
    return 0;
}
