/* Checks of the reply scanner on well-formed, tricky and malformed documents. Exit status 0 when all hold. */
#include "json_scan.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(condition)                                                         \
    do {                                                                         \
        if (!(condition)) {                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

static void finds_members_past_nested_values(void) {
    const char *doc = "{\"ok\":true,\"data\":{\"a\":[1,{\"job\":9},\"}\"],\"job\":42,\"s\":\"x\"}}";
    const char *data = json_find(doc, "data");
    uint64_t job = 0;
    CHECK(data != NULL);
    CHECK(json_is_true(json_find(doc, "ok")));
    CHECK(json_u64(json_find(data, "job"), &job) != NULL && job == 42);
    CHECK(json_find(doc, "job") == NULL); /* only members of the object itself */
    CHECK(json_find(doc, "missing") == NULL);
    CHECK(json_find("{}", "ok") == NULL);
    CHECK(json_find("  { \"ok\" : false } ", "ok") != NULL && !json_is_true(json_find("{\"ok\":false}", "ok")));
}

static void decodes_strings_with_escapes(void) {
    char out[64];
    CHECK(json_string("\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\"", out, sizeof out) != NULL);
    CHECK(strcmp(out, "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80") == 0);
    CHECK(json_string("\"too long\"", out, 4) == NULL);
    CHECK(json_string("\"\\ud83d alone\"", out, sizeof out) == NULL);
    CHECK(json_string("\"\\x\"", out, sizeof out) == NULL);
    CHECK(json_string("\"unterminated", out, sizeof out) == NULL);
    CHECK(json_string("42", out, sizeof out) == NULL);
}

static void reads_numbers_and_arrays(void) {
    uint64_t n = 0;
    double d = 0;
    uint32_t len = 99;
    CHECK(json_u64("18446744073709551615", &n) != NULL && n == UINT64_MAX);
    CHECK(json_u64("18446744073709551616", &n) == NULL);
    CHECK(json_u64("-1", &n) == NULL);
    CHECK(json_u64("1.5", &n) == NULL);
    CHECK(json_double("0.25", &d) != NULL && d == 0.25);
    CHECK(json_double("-3e2", &d) != NULL && d == -300.0);
    CHECK(json_double("\"1\"", &d) == NULL);
    CHECK(json_array_length("[]", &len) != NULL && len == 0);
    CHECK(json_array_length("[1, [2, 3], {\"a\": [4]}, \"]\"]", &len) != NULL && len == 4);
    CHECK(json_array_length("[1, 2", &len) == NULL);
    CHECK(json_array_first("[]") == NULL);
    CHECK(json_array_first("[ {\"x\":1} ]") != NULL && json_find(json_array_first("[ {\"x\":1} ]"), "x") != NULL);
}

static void refuses_malformed_documents(void) {
    CHECK(json_skip("{\"a\":}") == NULL);
    CHECK(json_skip("{\"a\" 1}") == NULL);
    CHECK(json_skip("[1,,2]") == NULL);
    CHECK(json_skip("tru") == NULL);
    CHECK(json_skip("") == NULL);
    CHECK(json_find("{\"a\":[1,}", "b") == NULL);
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 99);
    deep[199] = '\0';
    CHECK(json_skip(deep) == NULL); /* nesting beyond the bound, and unbalanced */
    const char *very_long_key = "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":1,\"ok\":true}";
    CHECK(json_is_true(json_find(very_long_key, "ok")));
    /* What strtod takes and JSON does not. */
    double value = 0;
    const char *not_json[] = {"inf", "-inf", "nan", "0x10", "+1", "1.", ".5", "01", "1e", "-"};
    for (size_t i = 0; i < sizeof not_json / sizeof not_json[0]; i++) {
        CHECK(json_double(not_json[i], &value) == NULL);
    }
}

/* A program may set a locale whose decimal separator is a comma; JSON's is always a point. */
static void reads_numbers_under_a_comma_locale(void) {
    if (setlocale(LC_ALL, "de_DE.UTF-8") == NULL) {
        fprintf(stderr, "FAILED: reads_numbers_under_a_comma_locale: no de_DE.UTF-8 locale (scripts/setup makes it)\n");
        failures++; /* not silently: the set-up must provide it */
        return;
    }
    double load = 0;
    CHECK(json_double("0.75", &load) != NULL && load == 0.75);
    CHECK(json_double("-1.5e3", &load) != NULL && load == -1500.0);
    const char *doc = "{\"nodes\":[{\"load_avg\":0.75,\"cpus\":2}]}";
    uint32_t count = 0;
    CHECK(json_array_length(json_find(doc, "nodes"), &count) != NULL && count == 1);
    CHECK(json_find("{\"a\":1.25,\"b\":7}", "b") != NULL);
    setlocale(LC_ALL, "C");
}

int main(void) {
    finds_members_past_nested_values();
    decodes_strings_with_escapes();
    reads_numbers_and_arrays();
    refuses_malformed_documents();
    reads_numbers_under_a_comma_locale();
    if (failures == 0) printf("json_scan_check: all checks hold\n");
    return failures == 0 ? 0 : 1;
}
