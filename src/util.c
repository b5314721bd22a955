/*
 * Small helpers: range-checked number, duration and time parsing for
 * options and records (every number a user gives is checked and the error
 * names the limit), a monotonic clock, fixed byte orders for what is
 * stored, and ranges of document numbers.
 */

#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mhfilter.h"

#ifdef MHF_AVX2
#include <immintrin.h>
#endif

/* Parse an unsigned decimal in [min, max]. */
int
parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out,
    char **cause)
{
	char			*end;
	unsigned long long	 v;

	errno = 0;
	if (!isdigit((unsigned char)*s)) {
		if (*s == '-' && isdigit((unsigned char)s[1]) &&
		    strspn(s + 1, "0123456789") == strlen(s + 1))
			goto range;	/* a number, but negative */
		xasprintf(cause, "'%s' is not a number", s);
		return (-1);
	}
	v = strtoull(s, &end, 10);
	if (*end != '\0') {
		xasprintf(cause, "'%s' is not a number", s);
		return (-1);
	}
	if (errno == ERANGE || v < min || v > max)
		goto range;
	*out = v;
	return (0);
range:
	xasprintf(cause, "'%s' is out of range (%llu to %llu)", s,
	    (unsigned long long)min, (unsigned long long)max);
	return (-1);
}

/* A size for a message: with the largest binary suffix that is exact. */
static void
size_str(uint64_t v, char *out, size_t len)
{
	static const char	 units[] = "KMGT";
	int			 i;

	for (i = 3; i >= 0; i--) {
		if (v != 0 && v % (1ULL << (10 * (i + 1))) == 0) {
			snprintf(out, len, "%llu%c", (unsigned long long)(v >>
			    (10 * (i + 1))), units[i]);
			return;
		}
	}
	snprintf(out, len, "%llu", (unsigned long long)v);
}

/* Parse a size with an optional binary suffix (K, M, G, T) in [min, max]. */
int
parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out,
    char **cause)
{
	char			*end, lo[32], hi[32];
	unsigned long long	 v;
	uint64_t		 mult = 1;

	errno = 0;
	if (*s == '-' && isdigit((unsigned char)s[1]))
		goto range;	/* a negative number */
	if (!isdigit((unsigned char)*s))
		goto bad;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		goto range;
	switch (*end) {
	case '\0':
		break;
	case 't': case 'T':
		mult = 1ULL << 40;
		end++;
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
	xasprintf(cause, "'%s' is not a size (a number, optionally with K, M, "
	    "G or T)", s);
	return (-1);
range:
	size_str(min, lo, sizeof lo);
	size_str(max, hi, sizeof hi);
	xasprintf(cause, "'%s' is out of range (%s to %s bytes)", s, lo,
	    hi);
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

/* The units of a duration, in seconds. */
static const struct {
	const char	*name;
	double		 secs;
} duration_units[] = {
	{ "us", 1e-6 }, { "ms", 1e-3 }, { "s", 1 }, { "m", 60 },
	{ "h", 3600 }, { "d", 86400 }, { "w", 7 * 86400 }
};
#define NUNITS		(sizeof duration_units / sizeof duration_units[0])
#define DURATION_UNITS	"us, ms, s, m, h, d or w"

/* secs in the largest unit that holds it whole ("36500d", "1s", "5ms"). */
static void
duration_str(double secs, char *buf, size_t len)
{
	double	 n;
	size_t	 i;

	for (i = NUNITS; i-- > 0;) {
		n = secs / duration_units[i].secs;
		if (n >= 1 && fabs(n - round(n)) < 1e-9) {
			snprintf(buf, len, "%.0f%s", n, duration_units[i].name);
			return;
		}
	}
	snprintf(buf, len, "%.15gs", secs);
}

/*
 * Parse a duration: one or more numbers, each with a unit us, ms, s, m, h,
 * d or w ("5ms", "1d12h"); with loose, a lone number is seconds and numbers
 * may have a fraction ("2", "1.5m").  Within [lo, hi] seconds.  The one
 * parser of every duration option.
 */
static int
duration_parse(const char *s, int loose, double lo, double hi, double *out,
    char **cause)
{
	const char	*p = s, *unit;
	char		 num[64], los[32], his[32];
	double		 v, total = 0;
	size_t		 i, len, nlen;

	if (*p == '\0')
		goto bad;
	while (*p != '\0') {
		if (!isdigit((unsigned char)*p))
			goto bad;
		/* Digits and a fraction: strtod alone takes "1e3", "0x10". */
		nlen = strspn(p, "0123456789");
		if (p[nlen] == '.' && loose)
			nlen += 1 + strspn(p + nlen + 1, "0123456789");
		if (nlen >= sizeof num)
			goto range;
		memcpy(num, p, nlen);
		num[nlen] = '\0';
		v = strtod(num, NULL);
		unit = p + nlen;
		if (*unit == '\0' && p == s && loose) {
			total = v;	/* a lone number: seconds */
			break;
		}
		len = strcspn(unit, "0123456789");
		for (i = 0; i < NUNITS; i++) {
			if (strlen(duration_units[i].name) == len &&
			    strncmp(unit, duration_units[i].name, len) == 0)
				break;
		}
		if (len == 0 || (*unit == '.' && !loose))
			goto bad;
		if (i == NUNITS) {
			xasprintf(cause, "'%s': unknown unit '%.*s' (a duration "
			    "is numbers with a unit " DURATION_UNITS ")", s,
			    (int)len, unit);
			return (-1);
		}
		total += v * duration_units[i].secs;
		p = unit + len;
	}
	if (!isfinite(total) || total < lo || total > hi)
		goto range;
	*out = total;
	return (0);
bad:
	xasprintf(cause, "'%s' is not a duration (numbers with a unit "
	    DURATION_UNITS ", like 5ms, 10m or 1d12h)", s);
	return (-1);
range:
	duration_str(lo, los, sizeof los);
	duration_str(hi, his, sizeof his);
	xasprintf(cause, "'%s' is out of range (%s to %s)", s, los, his);
	return (-1);
}

/*
 * A duration in seconds within [lo, hi], a lone number being seconds
 * (--batch-delay, --idle-timeout).
 */
int
parse_seconds(const char *s, double lo, double hi, double *out, char **cause)
{
	return (duration_parse(s, 1, lo, hi, out, cause));
}

/*
 * A duration in whole seconds within [min, max], each number whole and
 * with a unit: "--retain 30" meaning 30 seconds would empty an index.
 */
int
parse_duration(const char *s, int64_t min, int64_t max, int64_t *out,
    char **cause)
{
	double	 v;

	if (duration_parse(s, 0, (double)min, (double)max, &v, cause) != 0)
		return (-1);
	*out = (int64_t)llround(v);
	return (0);
}

/* Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant). */
static int64_t
days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t		 era;
	unsigned	 yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return (era * 146097 + (int64_t)doe - 719468);
}

/* The date of a day number, the inverse of days_from_civil. */
static void
civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t		 era;
	unsigned	 doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (unsigned)(z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* Read exactly n decimal digits. */
static int
digits(const char **pp, int n, unsigned *out)
{
	const char	*p = *pp;
	unsigned	 v = 0;

	while (n-- > 0) {
		if (!isdigit((unsigned char)*p))
			return (-1);
		v = v * 10 + (*p++ - '0');
	}
	*pp = p;
	*out = v;
	return (0);
}

/*
 * Parse a document time: RFC 3339 ("2026-11-21T10:00:00Z", with an offset
 * like "+01:00" instead of Z, with fractional seconds, 't', 'z' or a space
 * for 'T' allowed) or seconds since the epoch ("1763719200", "1763719200.5").
 * Fractions are truncated.  The result is in [TIME_MIN, TIME_MAX]: 0 means
 * "no time" in a record, and nothing after year 9999 can be printed back.
 */
int
parse_time(const char *s, int64_t *out, char **cause)
{
	static const unsigned mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30,
	    31, 30, 31 };
	const char	*p = s;
	unsigned	 y, mo, d, h, mi, sec, oh = 0, om = 0;
	int64_t		 t;
	int		 sign = 0, leap;

	if (isdigit((unsigned char)*p) && strchr(s, '-') == NULL) {
		/* Seconds since the epoch, no sign or exponent. */
		t = 0;
		for (; isdigit((unsigned char)*p); p++) {
			if (t > TIME_MAX)
				goto range;
			t = t * 10 + (*p - '0');
		}
		if (*p == '.' && isdigit((unsigned char)p[1]))
			for (p++; isdigit((unsigned char)*p); p++)
				/* truncated */;
		if (*p != '\0')
			goto bad;
		goto done;
	}
	if (digits(&p, 4, &y) != 0 || *p++ != '-' ||
	    digits(&p, 2, &mo) != 0 || *p++ != '-' ||
	    digits(&p, 2, &d) != 0)
		goto bad;
	if (*p != 'T' && *p != 't' && *p != ' ')
		goto bad;
	p++;
	if (digits(&p, 2, &h) != 0 || *p++ != ':' ||
	    digits(&p, 2, &mi) != 0 || *p++ != ':' ||
	    digits(&p, 2, &sec) != 0)
		goto bad;
	if (*p == '.') {
		if (!isdigit((unsigned char)*++p))
			goto bad;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p == 'Z' || *p == 'z')
		p++;
	else if (*p == '+' || *p == '-') {
		sign = *p++ == '+' ? 1 : -1;
		if (digits(&p, 2, &oh) != 0 || *p++ != ':' ||
		    digits(&p, 2, &om) != 0)
			goto bad;
	} else
		goto bad;
	if (*p != '\0')
		goto bad;

	leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
	    (mo == 2 && d == 29 && !leap) || h > 23 || mi > 59 || sec > 60 ||
	    oh > 23 || om > 59) {
		xasprintf(cause, "'%s' is not a valid date and time", s);
		return (-1);
	}
	/* A leap second (:60) counts as the next second. */
	t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
	t -= sign * (int64_t)(oh * 3600 + om * 60);
done:
	if (t < TIME_MIN || t > TIME_MAX)
		goto range;
	*out = t;
	return (0);
bad:
	xasprintf(cause, "'%s' is not a time (RFC 3339, like "
	    "2026-11-21T10:00:00Z, or seconds since the epoch)", s);
	return (-1);
range:
	xasprintf(cause, "'%s' is out of range (1970-01-01T00:00:01Z to "
	    "9999-12-31T23:59:59Z)", s);
	return (-1);
}

/* Write a time as RFC 3339 in UTC: "2026-11-21T10:00:00Z". */
void
format_time(int64_t t, char *out, size_t len)
{
	int64_t		 days, secs, y;
	unsigned	 m, d;

	days = t / 86400;
	secs = t % 86400;
	if (secs < 0) {
		secs += 86400;
		days--;
	}
	civil_from_days(days, &y, &m, &d);
	snprintf(out, len, "%04lld-%02u-%02uT%02u:%02u:%02uZ", (long long)y, m,
	    d, (unsigned)(secs / 3600), (unsigned)(secs / 60 % 60),
	    (unsigned)(secs % 60));
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

/* Is x in one of the [first, end) pairs of v (in order, apart)? */
int
pairs_has(const struct u64vec *v, uint64_t x)
{
	size_t	 lo = 0, hi = v->n / 2, mid;

	while (lo < hi) {		/* the last pair starting <= x */
		mid = lo + (hi - lo) / 2;
		if (v->v[2 * mid] <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo > 0 && x < v->v[2 * (lo - 1) + 1]);
}

/* Append [first, end), past every pair of v, to v (merged if adjacent). */
void
pairs_add(struct u64vec *v, uint64_t first, uint64_t end)
{
	if (v->n > 0 && v->v[v->n - 1] == first) {
		v->v[v->n - 1] = end;
		return;
	}
	u64vec_push(v, first);
	u64vec_push(v, end);
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

#ifdef MHF_AVX2
/*
 * ascii_span's first part with AVX2: the whole 32-byte blocks of ASCII at
 * the start of p, and the ASCII bytes at the start of the next block.
 */
__attribute__((target("avx2"))) static size_t
ascii_span_avx2(const unsigned char *p, size_t len)
{
	uint32_t	 high;
	size_t		 i;

	for (i = 0; len - i >= 32; i += 32) {
		high = (uint32_t)_mm256_movemask_epi8(_mm256_loadu_si256(
		    (const __m256i *)(p + i)));
		if (high != 0)
			return (i + (size_t)__builtin_ctz(high));
	}
	return (i);
}

/* The same with AVX-512, 64 bytes at a time. */
__attribute__((target("avx512f,avx512bw"))) static size_t
ascii_span_avx512(const unsigned char *p, size_t len)
{
	uint64_t	 high;
	size_t		 i;

	for (i = 0; len - i >= 64; i += 64) {
		high = _mm512_movepi8_mask(_mm512_loadu_si512(p + i));
		if (high != 0)
			return (i + (size_t)__builtin_ctzll(high));
	}
	return (i);
}
#endif

/*
 * The length of the run of ASCII bytes at the start of p, 64 (with
 * AVX-512), 32 (AVX2) or 8 at a time.  normalize and the shingler call it
 * on every text.
 */
size_t
ascii_span(const unsigned char *p, size_t len)
{
	uint64_t	 w;
	size_t		 i = 0;

#ifdef MHF_AVX2
	if (len >= 64 && simd_avx512()) {
		i = ascii_span_avx512(p, len);
		if (i < len && p[i] >= 0x80)
			return (i);
	}
	if (len - i >= 32 && simd_avx2()) {
		i += ascii_span_avx2(p + i, len - i);
		if (i < len && p[i] >= 0x80)
			return (i);
	}
#endif
	for (; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		if (w & 0x8080808080808080ULL)
			break;
	}
	while (i < len && p[i] < 0x80)
		i++;
	return (i);
}

/*
 * May the hashing loops (normalize.c, shingle.c, ascii_span) use AVX2, and
 * those that have one (shingle.c, minhash.c) AVX-512?  Where they were
 * built with it (MHF_AVX2) and the CPU has it, unless the tests said otherwise
 * (simd_allow).
 */
static int	simd_level = SIMD_ALL;

int
simd_avx2(void)
{
#ifdef MHF_AVX2
	return (simd_level != SIMD_NONE && __builtin_cpu_supports("avx2"));
#else
	return (0);
#endif
}

int
simd_avx512(void)
{
#ifdef MHF_AVX2
	return (simd_level == SIMD_ALL && __builtin_cpu_supports("avx2") &&
	    __builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512dq"));
#else
	return (0);
#endif
}

/* simd_avx512, and the byte compress of AVX512_VBMI2 (normalize.c). */
int
simd_avx512_vbmi2(void)
{
#ifdef MHF_AVX2
	return (simd_avx512() && __builtin_cpu_supports("avx512vbmi2"));
#else
	return (0);
#endif
}

/*
 * Tests: let the hashing loops use what the CPU has (SIMD_ALL, 1), AVX2
 * but not AVX-512 (SIMD_AVX2), or keep them to the portable code
 * (SIMD_NONE, 0).  Returns whether AVX2 will be used.
 */
int
simd_allow(int level)
{
	simd_level = level;
	return (simd_avx2());
}

/*
 * Start a thread with every signal blocked, so that signals go to the main
 * thread and interrupt its reads; but for the faults, which the thread
 * raises itself and cannot block (the kernel kills the process instead of
 * running a handler: lmdb.c catches them on a damaged index).
 */
void
thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	sigset_t	 all, old;
	int		 rc;

	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		fatalx("cannot start a thread");
}

/*
 * Standard input, output or error closed when the process starts: the
 * next file opened (an input, the index's lock.mdb) would take its number,
 * and records or messages written to "standard output" would go into it.
 * Each closed one is opened on /dev/null the other way round, so that
 * using it fails: a read of input, or a write of output, is then the
 * error it should be (exit 1), not silent damage.
 */
void
std_fds_open(void)
{
	int	 fd, want;

	for (want = 0; want <= 2; want++) {
		if (fcntl(want, F_GETFD) != -1 || errno != EBADF)
			continue;
		fd = open("/dev/null", want == 0 ? O_WRONLY : O_RDONLY);
		if (fd != want) {
			/* (No stderr to say it on, perhaps: the status.) */
			_exit(1);
		}
	}
}
