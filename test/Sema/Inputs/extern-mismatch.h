// The declarations that test/Sema/extern-header-mismatch.grad checks; the
// notes of gradc's errors land here, on the function or the parameter.
#include <stdint.h>

extern "C" {
int soft_threshold(int64_t N, const float *x, float t, float *out); // expected-note {{'soft_threshold' is declared here as 'int (int64_t, const float *, float, float *)'}}
int three_params(int64_t N, const float *x, float *out); // expected-note {{'three_params' is declared here as 'int (int64_t, const float *, float *)'}}
int wrong_element(int64_t N, const double *x, float *out); // expected-note {{parameter 'x' is declared here as 'const double *'}}
int not_const(int64_t N, float *x, float *out); // expected-note {{parameter 'x' is declared here as 'float *'}}
int wrong_order(const float *x, int64_t N, float *out); // expected-note {{'wrong_order' is declared here as 'int (const float *, int64_t, float *)'}}
float returns_float(int64_t N, const float *x, float *out); // expected-note {{'returns_float' is declared here as 'float (int64_t, const float *, float *)'}}
void returns_void(int64_t N, const float *x, float *out);
int scalar_by_value(int64_t N, const float *x, const float *t, float *out); // expected-note {{parameter 't' is declared here as 'const float *'}}
}

int cxx_linkage(int64_t N, const float *x, float *out); // expected-note {{'cxx_linkage' is declared here as 'int (int64_t, const float *, float *)'}}
