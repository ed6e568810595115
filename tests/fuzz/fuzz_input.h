/* Decoding helpers shared by the libFuzzer harnesses: sizes, option bytes,
 * raw doubles (any bit pattern: NaN, Inf, subnormals, huge values) and unit
 * scalings from the fuzz input; past its end everything reads as 0. */
#ifndef CDYN_FUZZ_INPUT_H
#define CDYN_FUZZ_INPUT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *data;
    size_t size, pos;
} fuzz_input;

static inline uint8_t fuzz_byte(fuzz_input *in)
{
    return in->pos < in->size ? in->data[in->pos++] : 0;
}

/* A size in [lo, hi]; one byte in 16 is hostile (negative or huge). */
static inline int fuzz_size(fuzz_input *in, int lo, int hi)
{
    uint8_t b = fuzz_byte(in);
    if (b == 0xFF) return -1 - (int)fuzz_byte(in);
    if (b == 0xFE) return 1 << 20;
    return lo + (int)(b % (unsigned)(hi - lo + 1));
}

/* A double: mostly moderate values from two bytes, sometimes raw bits. */
static inline double fuzz_double(fuzz_input *in)
{
    uint8_t kind = fuzz_byte(in);
    if ((kind & 0x0F) == 0x0F) {
        double d = 0.0;
        uint8_t raw[8] = {0};
        for (int i = 0; i < 8; ++i) raw[i] = fuzz_byte(in);
        memcpy(&d, raw, sizeof d);
        return d;
    }
    int16_t v = (int16_t)(fuzz_byte(in) | (fuzz_byte(in) << 8));
    return (double)v / 1024.0;
}

static inline void fuzz_fill(fuzz_input *in, double *x, size_t count)
{
    for (size_t i = 0; i < count; ++i) x[i] = fuzz_double(in);
}

/* A unit scaling (a change of units): 1 for byte 0 (so inputs that end
 * early stay unscaled). Bytes below 0xC0 give 10^k or, with bit 0 set, 2^k
 * for |k| <= 8; the rest give 10^k for |k| <= 30. */
static inline double fuzz_scale(fuzz_input *in)
{
    uint8_t b = fuzz_byte(in);
    int z = b < 0xC0 ? (b >> 1) % 17 : (b - 0xC0) % 61;
    int k = (z & 1) ? -(z + 1) / 2 : z / 2; /* z = 0, 1, 2, 3, ... → k = 0, -1, 1, -2, ... */
    return b < 0xC0 && (b & 1) ? ldexp(1.0, k) : pow(10.0, k);
}

static inline void fuzz_scales(fuzz_input *in, double *s, int count)
{
    for (int i = 0; i < count; ++i) s[i] = fuzz_scale(in);
}

/* A <- diag(r) A diag(c) for the rows x cols column-major A (leading
 * dimension ld); r or c NULL leaves that side alone. */
static inline void fuzz_scale_matrix(double *A, int rows, int cols, int ld, const double *r,
                                     const double *c)
{
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i)
            A[i + (size_t)ld * j] *= (r ? r[i] : 1.0) * (c ? c[j] : 1.0);
}

/* x <- diag(s) x */
static inline void fuzz_scale_vector(double *x, int count, const double *s)
{
    for (int i = 0; i < count; ++i) x[i] *= s[i];
}

/* Guard values after each output array: must survive every call. */
#define FUZZ_GUARD 8
static inline void fuzz_guard_set(double *x, size_t count)
{
    for (size_t i = 0; i < FUZZ_GUARD; ++i) x[count + i] = 1234.5;
}
static inline int fuzz_guard_ok(const double *x, size_t count)
{
    for (size_t i = 0; i < FUZZ_GUARD; ++i)
        if (x[count + i] != 1234.5) return 0;
    return 1;
}

/* CDYN_OK means a finite result: abort on an OK call whose output (count
 * entries, x may be NULL) holds NaN or Inf. Returns status. */
static inline int fuzz_ok_finite(int status, const double *x, size_t count)
{
    if (status != 0 || !x) return status;
    for (size_t i = 0; i < count; ++i)
        if (!(x[i] - x[i] == 0.0)) abort(); /* NaN or Inf */
    return status;
}

#endif
