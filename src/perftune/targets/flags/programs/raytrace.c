/* A small ray tracer: spheres, a plane, diffuse + specular shading, shadows and reflections.
 * Usage: raytrace WIDTH HEIGHT   (written for perftune; MIT licence)
 * Output: mean colour per channel with %.10e (compare with a relative tolerance). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { double x, y, z; } vec;
static vec v(double x, double y, double z) { vec r = {x, y, z}; return r; }
static vec add(vec a, vec b) { return v(a.x + b.x, a.y + b.y, a.z + b.z); }
static vec sub(vec a, vec b) { return v(a.x - b.x, a.y - b.y, a.z - b.z); }
static vec mul(vec a, double s) { return v(a.x * s, a.y * s, a.z * s); }
static double dot(vec a, vec b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static vec norm(vec a) { return mul(a, 1.0 / sqrt(dot(a, a))); }

typedef struct { vec centre; double radius; vec colour; double reflect; } sphere;
#define NS 9
static sphere scene[NS];

static int hit(vec o, vec d, double *t_out, vec *n_out, vec *c_out, double *refl) {
    double best = 1e30; int found = 0;
    for (int i = 0; i < NS; i++) {
        vec oc = sub(o, scene[i].centre);
        double b = dot(oc, d), c = dot(oc, oc) - scene[i].radius * scene[i].radius;
        double disc = b * b - c;
        if (disc <= 0) continue;
        double s = sqrt(disc), t = -b - s;
        if (t < 1e-6) t = -b + s;
        if (t > 1e-6 && t < best) {
            best = t; found = 1;
            *n_out = norm(sub(add(o, mul(d, t)), scene[i].centre));
            *c_out = scene[i].colour; *refl = scene[i].reflect;
        }
    }
    if (d.y < -1e-9) {  /* ground plane y = -1 with a checker pattern */
        double t = (-1.0 - o.y) / d.y;
        if (t > 1e-6 && t < best) {
            vec p = add(o, mul(d, t));
            int check = ((int)floor(p.x) + (int)floor(p.z)) & 1;
            best = t; found = 1; *n_out = v(0, 1, 0);
            *c_out = check ? v(0.9, 0.9, 0.9) : v(0.2, 0.2, 0.25); *refl = 0.15;
        }
    }
    *t_out = best;
    return found;
}

static vec trace(vec o, vec d, int depth) {
    double t, refl; vec n, col;
    if (!hit(o, d, &t, &n, &col, &refl)) {
        double k = 0.5 * (d.y + 1.0);
        return add(mul(v(1, 1, 1), 1.0 - k), mul(v(0.5, 0.7, 1.0), k));
    }
    vec p = add(o, mul(d, t)), light = norm(v(-0.6, 1.0, -0.4));
    double diffuse = dot(n, light);
    double ts; vec n2, c2; double r2;
    if (diffuse < 0 || hit(add(p, mul(n, 1e-4)), light, &ts, &n2, &c2, &r2)) diffuse = 0;
    vec h = norm(sub(light, d));
    double spec = pow(fmax(dot(n, h), 0.0), 40.0) * (diffuse > 0);
    vec out = add(mul(col, 0.1 + 0.9 * diffuse), v(spec, spec, spec));
    if (depth < 4 && refl > 0) {
        vec rd = norm(sub(d, mul(n, 2 * dot(d, n))));
        out = add(mul(out, 1 - refl), mul(trace(add(p, mul(n, 1e-4)), rd, depth + 1), refl));
    }
    return out;
}

int main(int argc, char **argv) {
    int w = argc > 1 ? atoi(argv[1]) : 800, h = argc > 2 ? atoi(argv[2]) : 600;
    if (w < 1 || h < 1) { fprintf(stderr, "usage: raytrace WIDTH HEIGHT\n"); return 2; }
    for (int i = 0; i < NS; i++) {
        double a = i * 0.7;
        scene[i].centre = v(3.0 * cos(a), -0.4 + 0.3 * (i % 3), 6.0 + 3.0 * sin(a));
        scene[i].radius = 0.45 + 0.1 * (i % 4);
        scene[i].colour = v(0.3 + 0.7 * ((i * 37) % 10) / 10.0, 0.3 + 0.7 * ((i * 53) % 10) / 10.0,
                            0.3 + 0.7 * ((i * 71) % 10) / 10.0);
        scene[i].reflect = (i % 3 == 0) ? 0.5 : 0.1;
    }
    vec sum = v(0, 0, 0);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            for (int s = 0; s < 4; s++) {  /* 4 samples per pixel on a fixed pattern */
                double dx = (x + 0.25 + 0.5 * (s & 1) - w / 2.0) / h, dy = -(y + 0.25 + 0.5 * (s >> 1) - h / 2.0) / h;
                sum = add(sum, trace(v(0, 0.2, 0), norm(v(dx, dy, 1.0)), 0));
            }
        }
    double k = 1.0 / (4.0 * w * h);
    printf("mean_r %.10e\nmean_g %.10e\nmean_b %.10e\n", sum.x * k, sum.y * k, sum.z * k);
    return 0;
}
