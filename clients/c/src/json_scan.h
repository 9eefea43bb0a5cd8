/*
 * Just enough JSON reading for the controller's replies: find a member of an object, read a string, a number, a
 * boolean, an array's length or first element. Every function takes a pointer at the start of a value (leading
 * white space allowed) inside a NUL-terminated document (NULL is accepted and gives NULL, so calls chain) and returns NULL when the text is not what it expects, so
 * a malformed reply is an error, never a crash.
 */
#ifndef COSCHED_JSON_SCAN_H
#define COSCHED_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* The value of member `key` of the object at `object`, or NULL. */
const char *json_find(const char *object, const char *key);

/* The end of the value at `value`, or NULL if it is malformed. */
const char *json_skip(const char *value);

int json_is_true(const char *value);

/* Decode the string at `value` into out[0..out_len) (NUL-terminated); NULL if it is not a string or does not fit. */
const char *json_string(const char *value, char *out, size_t out_len);

/* Read a non-negative integer / a number; NULL if the value is not one. */
const char *json_u64(const char *value, uint64_t *out);
const char *json_double(const char *value, double *out);

/* The number of elements of the array at `value`; NULL if it is not an array. */
const char *json_array_length(const char *value, uint32_t *out);

/* The first element of the array at `value`, or NULL if it is empty or not an array. */
const char *json_array_first(const char *value);

#endif
