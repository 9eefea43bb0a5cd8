/* newlocale and uselocale are POSIX.1-2008. */
#define _POSIX_C_SOURCE 200809L
#include "json_scan.h"

#include <errno.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>

/* Nesting deeper than this is refused: the controller's replies are a few levels deep, and a bound keeps a
 * malicious reply from exhausting the stack. */
#define MAX_DEPTH 32

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

static int hex_digit(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Read four hex digits at p into *code; 0 if they are not hex. */
static int read_hex4(const char *p, unsigned *code) {
    *code = 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_digit(p[i]);
        if (digit < 0) return 0;
        *code = *code * 16 + (unsigned)digit;
    }
    return 1;
}

/* UTF-8 encoding of code into out; the number of bytes. */
static size_t utf8_encode(unsigned code, char out[4]) {
    if (code < 0x80) {
        out[0] = (char)code;
        return 1;
    }
    if (code < 0x800) {
        out[0] = (char)(0xC0 | (code >> 6));
        out[1] = (char)(0x80 | (code & 0x3F));
        return 2;
    }
    if (code < 0x10000) {
        out[0] = (char)(0xE0 | (code >> 12));
        out[1] = (char)(0x80 | ((code >> 6) & 0x3F));
        out[2] = (char)(0x80 | (code & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (code >> 18));
    out[1] = (char)(0x80 | ((code >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((code >> 6) & 0x3F));
    out[3] = (char)(0x80 | (code & 0x3F));
    return 4;
}

/* Decode one escape after the backslash at p[-1]; the bytes go to out (up to 4), their count to *len. Returns the
 * text after the escape, or NULL. */
static const char *decode_escape(const char *p, char out[4], size_t *len) {
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *simple = *p ? strchr(from, *p) : NULL;
    if (simple != NULL) {
        out[0] = to[simple - from];
        *len = 1;
        return p + 1;
    }
    unsigned code;
    if (*p != 'u' || !read_hex4(p + 1, &code)) return NULL;
    p += 5;
    if (code >= 0xD800 && code < 0xDC00) {
        unsigned low;
        if (p[0] != '\\' || p[1] != 'u' || !read_hex4(p + 2, &low) || low < 0xDC00 || low >= 0xE000) return NULL;
        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        p += 6;
    }
    *len = utf8_encode(code, out);
    return p;
}

/* Walk the string at p (which starts with a quote); when out is not NULL, decode into it. Returns the end. */
static const char *walk_string(const char *p, char *out, size_t out_len) {
    if (*p != '"') return NULL;
    p++;
    size_t used = 0;
    while (*p != '"') {
        char bytes[4];
        size_t len;
        if (*p == '\0' || (unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p = decode_escape(p + 1, bytes, &len);
            if (p == NULL) return NULL;
        } else {
            bytes[0] = *p++;
            len = 1;
        }
        if (out != NULL) {
            if (used + len >= out_len) return NULL;
            memcpy(out + used, bytes, len);
        }
        used += len;
    }
    if (out != NULL) out[used] = '\0';
    return p + 1;
}

/* strtod in the C locale whatever the calling program chose: JSON numbers always use '.', and under a locale
 * such as de_DE.UTF-8 strtod would stop at it ("0.75" read as 0). uselocale changes the calling thread only. */
static double c_strtod(const char *p, char **end) {
    locale_t c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (c_numeric == (locale_t)0) {
        *end = (char *)p; /* no C locale: refuse rather than misread */
        return 0.0;
    }
    locale_t previous = uselocale(c_numeric);
    double value = strtod(p, end);
    uselocale(previous);
    freelocale(c_numeric);
    return value;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static const char *skip_digits(const char *p) {
    while (is_digit(*p)) p++;
    return p;
}

/* The end of the JSON number at p, or NULL: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? (RFC 8259). strtod alone
 * would also take "inf", "nan", hexadecimal and a leading '+'. */
static const char *skip_number(const char *p) {
    if (*p == '-') p++;
    if (*p == '0') {
        p++;
    } else if (is_digit(*p)) {
        p = skip_digits(p);
    } else {
        return NULL;
    }
    if (*p == '.') {
        if (!is_digit(*++p)) return NULL;
        p = skip_digits(p);
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!is_digit(*p)) return NULL;
        p = skip_digits(p);
    }
    return p;
}

static const char *skip_at_depth(const char *value, int depth);

/* The elements of an array or the members of an object, from just after the opening bracket. */
static const char *skip_container(const char *p, char close, int depth) {
    p = skip_ws(p);
    if (*p == close) return p + 1;
    for (;;) {
        if (close == '}') {
            p = walk_string(skip_ws(p), NULL, 0);
            if (p == NULL) return NULL;
            p = skip_ws(p);
            if (*p++ != ':') return NULL;
        }
        p = skip_at_depth(p, depth + 1);
        if (p == NULL) return NULL;
        p = skip_ws(p);
        if (*p == close) return p + 1;
        if (*p++ != ',') return NULL;
    }
}

static const char *skip_at_depth(const char *value, int depth) {
    if (depth > MAX_DEPTH) return NULL;
    const char *p = skip_ws(value);
    switch (*p) {
    case '{': return skip_container(p + 1, '}', depth);
    case '[': return skip_container(p + 1, ']', depth);
    case '"': return walk_string(p, NULL, 0);
    case 't': return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
    case 'f': return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
    case 'n': return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
    default: return (*p == '-' || (*p >= '0' && *p <= '9')) ? skip_number(p) : NULL;
    }
}

const char *json_skip(const char *value) { return value == NULL ? NULL : skip_at_depth(value, 0); }

const char *json_find(const char *object, const char *key) {
    if (object == NULL) return NULL;
    const char *p = skip_ws(object);
    if (*p++ != '{') return NULL;
    p = skip_ws(p);
    if (*p == '}') return NULL;
    size_t key_len = strlen(key);
    for (;;) {
        char name[64];
        const char *after = walk_string(skip_ws(p), name, sizeof name);
        /* A name too long for the buffer cannot be one we look for: skip it undecoded. */
        int matched = after != NULL && strlen(name) == key_len && memcmp(name, key, key_len) == 0;
        if (after == NULL) after = walk_string(skip_ws(p), NULL, 0);
        if (after == NULL) return NULL;
        p = skip_ws(after);
        if (*p++ != ':') return NULL;
        if (matched) return skip_ws(p);
        const char *end = json_skip(p);
        if (end == NULL) return NULL;
        p = skip_ws(end);
        if (*p++ != ',') return NULL;
    }
}

int json_is_true(const char *value) { return value != NULL && strncmp(skip_ws(value), "true", 4) == 0; }

const char *json_string(const char *value, char *out, size_t out_len) {
    if (value == NULL || out_len == 0) return NULL;
    return walk_string(skip_ws(value), out, out_len);
}

const char *json_u64(const char *value, uint64_t *out) {
    if (value == NULL) return NULL;
    const char *p = skip_ws(value);
    if (*p < '0' || *p > '9') return NULL;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(p, &end, 10);
    if (errno != 0 || *end == '.' || *end == 'e' || *end == 'E') return NULL;
    *out = n;
    return end;
}

const char *json_double(const char *value, double *out) {
    if (value == NULL) return NULL;
    const char *p = skip_ws(value);
    const char *number_end = skip_number(p);
    if (number_end == NULL) return NULL;
    char *end;
    double parsed = c_strtod(p, &end);
    if (end != number_end) return NULL;
    *out = parsed;
    return end;
}

const char *json_array_length(const char *value, uint32_t *out) {
    if (value == NULL) return NULL;
    const char *p = skip_ws(value);
    if (*p++ != '[') return NULL;
    uint32_t count = 0;
    p = skip_ws(p);
    if (*p == ']') {
        *out = 0;
        return p + 1;
    }
    for (;;) {
        p = json_skip(p);
        if (p == NULL) return NULL;
        count++;
        p = skip_ws(p);
        if (*p == ']') break;
        if (*p++ != ',') return NULL;
    }
    *out = count;
    return p + 1;
}

const char *json_array_first(const char *value) {
    if (value == NULL) return NULL;
    const char *p = skip_ws(value);
    if (*p++ != '[') return NULL;
    p = skip_ws(p);
    return *p == ']' ? NULL : p;
}
