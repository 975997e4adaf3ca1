/* CRC-32 (table driven) and Adler-32 over a pseudo-random buffer.
 * Usage: crc32 [KBYTES] [REPS]   (written for perftune; MIT licence) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t table[256];

static void make_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
}

static uint32_t crc32(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static uint32_t adler32(const unsigned char *p, size_t n) {
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + p[i]) % 65521u;
        b = (b + a) % 65521u;
    }
    return (b << 16) | a;
}

int main(int argc, char **argv) {
    size_t n = (size_t)(argc > 1 ? atoi(argv[1]) : 256) * 1024;
    int reps = argc > 2 ? atoi(argv[2]) : 4;
    unsigned char *buf = malloc(n);
    if (!buf) return 1;
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        buf[i] = (unsigned char)x;
    }
    make_table();
    uint32_t crc = 0, ad = 0;
    for (int r = 0; r < reps; r++) {
        buf[r % n] ^= (unsigned char)r;
        crc = crc * 31u + crc32(buf, n);
        ad = ad * 31u + adler32(buf, n);
    }
    printf("crc32 %08x\nadler32 %08x\n", crc, ad);
    free(buf);
    return 0;
}
