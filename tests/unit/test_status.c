/* test_status.c — status strings and version. */
#include "test.h"
#include "veloxquant.h"

TEST(status_strings) {
    ASSERT(strcmp(vq_status_str(VQ_STATUS_OK), "ok") == 0);
    ASSERT(strcmp(vq_status_str(VQ_STATUS_NON_FINITE), "input contains NaN or Inf") == 0);
    ASSERT(strcmp(vq_status_str(12345), "unknown status") == 0);
    ASSERT(strncmp(vq_version(), "0.", 2) == 0);
}

int main(void) {
    RUN(status_strings);
    return TEST_REPORT();
}
