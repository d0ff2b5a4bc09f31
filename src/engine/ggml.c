/*
 * ggml.c — ggml type traits and scalar reference kernels (see ggml.h).
 */
#include "engine/ggml.h"

#include <string.h>

#include "core/core.h"

/* ---- type traits --------------------------------------------------------------------- */

static const char *const g_type_names[] = {
    [0] = "F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [6] = "Q5_0", [7] = "Q5_1",
    [8] = "Q8_0", [9] = "Q8_1", [10] = "Q2_K", [11] = "Q3_K", [12] = "Q4_K", [13] = "Q5_K",
    [14] = "Q6_K", [15] = "Q8_K", [16] = "IQ2_XXS", [17] = "IQ2_XS", [18] = "IQ3_XXS",
    [19] = "IQ1_S", [20] = "IQ4_NL", [21] = "IQ3_S", [22] = "IQ2_S", [23] = "IQ4_XS", [24] = "I8",
    [25] = "I16", [26] = "I32", [27] = "I64", [28] = "F64", [29] = "IQ1_M", [30] = "BF16",
    [34] = "TQ1_0", [35] = "TQ2_0", [39] = "MXFP4", [40] = "NVFP4", [41] = "Q1_0", [42] = "Q2_0",
};

/* Returns the ggml name of a type id ("Q4_K"), or "unknown". */
const char *vq_ggml_type_name(uint32_t type) {
    if (type < sizeof g_type_names / sizeof g_type_names[0] && g_type_names[type])
        return g_type_names[type];
    return "unknown";
}

static const struct vq_ggml_type_info g_info[] = {
    [0] = {"F32", 1, 4},     [1] = {"F16", 1, 2},     [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},  [6] = {"Q5_0", 32, 22},  [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},  [9] = {"Q8_1", 32, 36},  [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110}, [12] = {"Q4_K", 256, 144}, [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210}, [15] = {"Q8_K", 256, 292}, [24] = {"I8", 1, 1},
    [25] = {"I16", 1, 2},    [26] = {"I32", 1, 4},    [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},    [30] = {"BF16", 1, 2},
};

const struct vq_ggml_type_info *vq_ggml_type_info(uint32_t type) {
    if (type < sizeof g_info / sizeof g_info[0] && g_info[type].name) return &g_info[type];
    return NULL;
}
