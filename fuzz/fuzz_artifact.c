/*
 * fuzz_artifact.c — libFuzzer target for the calibration artifact parser (untrusted input).
 * Any input must give a status without crashing; an accepted input must serialize back to
 * bytes that parse again to the same serialization (canonical, deterministic round trip).
 * Replayed over fuzz/corpus/artifact/ by ctest (replay_fuzz_artifact).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/artifact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vq_status st = VQ_STATUS_OK;
    uint32_t params[6];
    vq_calib_data *cd = vq_calib_parse(data, size, NULL, NULL, params, &st);
    if (!cd) {
        if (st == VQ_STATUS_OK) abort();
        return 0;
    }
    char tag[17];
    memcpy(tag, data + 12, 16);
    tag[16] = '\0';
    uint8_t *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    if (vq_calib_serialize(cd, tag, data + 28, params, &a, &la) != VQ_STATUS_OK) abort();
    vq_calib_data *cd2 = vq_calib_parse(a, la, tag, data + 28, NULL, &st);
    if (!cd2 || vq_calib_serialize(cd2, tag, data + 28, params, &b, &lb) != VQ_STATUS_OK) abort();
    if (la != lb || memcmp(a, b, la) != 0) abort();
    vq_free(a);
    vq_free(b);
    vq_calib_data_free(cd2);
    vq_calib_data_free(cd);
    return 0;
}
