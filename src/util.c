/*
 * Small helpers: range-checked number parsing for options (every number a
 * user gives is checked and the error names the limit), a monotonic clock,
 * and fixed byte orders for what is stored.
 */

#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mhfilter.h"

/* Parse an unsigned decimal in [min, max]. */
int
parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out,
    char **cause)
{
	char			*end;
	unsigned long long	 v;

	errno = 0;
	if (!isdigit((unsigned char)*s)) {
		xasprintf(cause, "'%s' is not a number", s);
		return (-1);
	}
	v = strtoull(s, &end, 10);
	if (*end != '\0') {
		xasprintf(cause, "'%s' is not a number", s);
		return (-1);
	}
	if (errno == ERANGE || v < min || v > max) {
		xasprintf(cause, "'%s' is out of range (%llu to %llu)", s,
		    (unsigned long long)min, (unsigned long long)max);
		return (-1);
	}
	*out = v;
	return (0);
}

/* Parse a size with an optional binary suffix (K, M, G) in [min, max]. */
int
parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out,
    char **cause)
{
	char			*end;
	unsigned long long	 v;
	uint64_t		 mult = 1;

	errno = 0;
	if (!isdigit((unsigned char)*s))
		goto bad;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		goto range;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		mult = 1ULL << 10;
		end++;
		break;
	case 'm': case 'M':
		mult = 1ULL << 20;
		end++;
		break;
	case 'g': case 'G':
		mult = 1ULL << 30;
		end++;
		break;
	default:
		goto bad;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0')
		goto bad;
	if (v > UINT64_MAX / mult)
		goto range;
	v *= mult;
	if (v < min || v > max)
		goto range;
	*out = v;
	return (0);
bad:
	xasprintf(cause, "'%s' is not a size (a number, optionally with K, M "
	    "or G)", s);
	return (-1);
range:
	xasprintf(cause, "'%s' is out of range (%llu to %llu bytes)", s,
	    (unsigned long long)min, (unsigned long long)max);
	return (-1);
}

/* Parse a finite real number in [min, max]. */
int
parse_double(const char *s, double min, double max, double *out,
    char **cause)
{
	char	*end;
	double	 v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v)) {
		xasprintf(cause, "'%s' is not a number", s);
		return (-1);
	}
	if (v < min || v > max) {
		xasprintf(cause, "'%s' is out of range (%g to %g)", s, min,
		    max);
		return (-1);
	}
	*out = v;
	return (0);
}

/* Seconds from a monotonic clock. */
double
now_seconds(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (ts.tv_sec + ts.tv_nsec / 1e9);
}

/* Store a 32-bit value little-endian, whatever the host. */
void
put_le32(unsigned char *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

/* Load a little-endian 32-bit value. */
uint32_t
get_le32(const unsigned char *p)
{
	return ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24);
}

/* Store a 64-bit value big-endian, so that byte order is numeric order. */
void
put_be64(unsigned char *p, uint64_t v)
{
	int	 i;

	for (i = 7; i >= 0; i--) {
		p[i] = v & 0xff;
		v >>= 8;
	}
}

/* Load a big-endian 64-bit value. */
uint64_t
get_be64(const unsigned char *p)
{
	uint64_t	 v = 0;
	int		 i;

	for (i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (v);
}

/*
 * Sort 64-bit values in place.  libc has only qsort, whose comparison calls
 * dominated exact verification (every candidate's shingle set is sorted);
 * an LSD radix sort of 11-bit digits (six passes, a 16 KiB count table)
 * is several times faster on the sizes that matter and needs one scratch
 * array.  Digits that are equal in every value are skipped.
 */
void
sort_u64(uint64_t *v, size_t n, struct u64vec *scratch)
{
	size_t		 count[1 << 11], i, sum, c;
	uint64_t	*src = v, *dst, *t, diff = 0;
	unsigned	 shift, d;

	if (n < 64) {
		for (i = 1; i < n; i++) {
			uint64_t x = v[i];
			size_t	 j = i;

			while (j > 0 && v[j - 1] > x) {
				v[j] = v[j - 1];
				j--;
			}
			v[j] = x;
		}
		return;
	}
	for (i = 1; i < n; i++)
		diff |= v[i] ^ v[0];
	if (scratch->size < n) {
		scratch->size = n;
		scratch->v = xreallocarray(scratch->v, n, sizeof *scratch->v);
	}
	dst = scratch->v;
	for (shift = 0; shift < 64; shift += 11) {
		if (((diff >> shift) & 0x7ff) == 0)
			continue;
		memset(count, 0, sizeof count);
		for (i = 0; i < n; i++)
			count[(src[i] >> shift) & 0x7ff]++;
		for (d = 0, sum = 0; d < (1 << 11); d++) {
			c = count[d];
			count[d] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
			dst[count[(src[i] >> shift) & 0x7ff]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	if (src != v)
		memcpy(v, src, n * sizeof *v);
}
