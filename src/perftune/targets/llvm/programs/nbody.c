/* Gravitational n-body simulation (leapfrog), printing the energy before and after.
 * Usage: nbody [BODIES] [STEPS]   (written for perftune; MIT licence) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct body { double x, y, z, vx, vy, vz, m; };

static double energy(const struct body *b, int n) {
    double e = 0.0;
    for (int i = 0; i < n; i++) {
        e += 0.5 * b[i].m * (b[i].vx * b[i].vx + b[i].vy * b[i].vy + b[i].vz * b[i].vz);
        for (int j = i + 1; j < n; j++) {
            double dx = b[i].x - b[j].x, dy = b[i].y - b[j].y, dz = b[i].z - b[j].z;
            e -= b[i].m * b[j].m / sqrt(dx * dx + dy * dy + dz * dz + 0.01);
        }
    }
    return e;
}

static void advance(struct body *b, int n, double dt) {
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double dx = b[i].x - b[j].x, dy = b[i].y - b[j].y, dz = b[i].z - b[j].z;
            double d2 = dx * dx + dy * dy + dz * dz + 0.01;
            double mag = dt / (d2 * sqrt(d2));
            b[i].vx -= dx * b[j].m * mag; b[i].vy -= dy * b[j].m * mag; b[i].vz -= dz * b[j].m * mag;
            b[j].vx += dx * b[i].m * mag; b[j].vy += dy * b[i].m * mag; b[j].vz += dz * b[i].m * mag;
        }
    for (int i = 0; i < n; i++) {
        b[i].x += dt * b[i].vx; b[i].y += dt * b[i].vy; b[i].z += dt * b[i].vz;
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    int steps = argc > 2 ? atoi(argv[2]) : 200;
    struct body *b = calloc((size_t)n, sizeof *b);
    if (!b) return 1;
    unsigned s = 12345u;
    for (int i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u; b[i].x = (s >> 8) % 1000 / 100.0;
        s = s * 1103515245u + 12345u; b[i].y = (s >> 8) % 1000 / 100.0;
        s = s * 1103515245u + 12345u; b[i].z = (s >> 8) % 1000 / 100.0;
        b[i].m = 1.0 + i % 3;
    }
    printf("energy0 %.6e\n", energy(b, n));
    for (int t = 0; t < steps; t++) advance(b, n, 0.001);
    printf("energy1 %.6e\n", energy(b, n));
    free(b);
    return 0;
}
