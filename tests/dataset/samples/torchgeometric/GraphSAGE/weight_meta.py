class Program_weight_tensor_meta_L_x_:
    name = "L_x_"
    shape = [1000, 128]
    dtype = "torch.float32"
    device = "cpu"
    mean = 0.004
    std = 0.997
    data = None


class Program_weight_tensor_meta_L_edge_index_:
    name = "L_edge_index_"
    shape = [2, 100]
    dtype = "torch.int64"
    device = "cpu"
    mean = None
    std = None
    data = [
        467,
        513,
        438,
        387,
        65,
        70,
        440,
        613,
        880,
        217,
        214,
        761,
        471,
        565,
        896,
        887,
        157,
        807,
        820,
        108,
        224,
        223,
        770,
        81,
        431,
        357,
        701,
        943,
        344,
        719,
        505,
        796,
        240,
        586,
        267,
        637,
        183,
        805,
        238,
        557,
        810,
        458,
        271,
        487,
        108,
        194,
        265,
        393,
        200,
        718,
        896,
        17,
        414,
        72,
        400,
        2,
        836,
        91,
        60,
        75,
        815,
        952,
        34,
        427,
        728,
        343,
        528,
        666,
        50,
        981,
        546,
        942,
        840,
        184,
        951,
        513,
        72,
        788,
        682,
        827,
        337,
        497,
        408,
        831,
        421,
        44,
        620,
        167,
        57,
        687,
        369,
        513,
        34,
        389,
        33,
        471,
        772,
        205,
        226,
        376,
        232,
        385,
        506,
        362,
        455,
        898,
        942,
        608,
        550,
        155,
        593,
        76,
        755,
        72,
        711,
        894,
        908,
        273,
        507,
        971,
        469,
        466,
        588,
        81,
        605,
        976,
        35,
        578,
        403,
        475,
        745,
        507,
        947,
        838,
        880,
        630,
        165,
        536,
        818,
        471,
        569,
        619,
        348,
        471,
        618,
        150,
        788,
        639,
        748,
        23,
        232,
        32,
        91,
        677,
        228,
        423,
        147,
        370,
        31,
        193,
        587,
        404,
        407,
        640,
        644,
        862,
        11,
        581,
        323,
        22,
        624,
        403,
        160,
        876,
        84,
        247,
        12,
        362,
        892,
        433,
        464,
        553,
        400,
        328,
        494,
        389,
        470,
        437,
        513,
        298,
        727,
        621,
        296,
        695,
        132,
        559,
        358,
        48,
        852,
        356,
    ]


class Program_weight_tensor_meta_L_self_modules_convs_modules_0_modules_lin_l_parameters_weight_:
    name = "L_self_modules_convs_modules_0_modules_lin_l_parameters_weight_"
    shape = [256, 128]
    dtype = "torch.float32"
    device = "cpu"
    mean = -0.000
    std = 0.051
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_0_modules_lin_l_parameters_bias_:
    name = "L_self_modules_convs_modules_0_modules_lin_l_parameters_bias_"
    shape = [256]
    dtype = "torch.float32"
    device = "cpu"
    mean = -0.004
    std = 0.051
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_0_modules_lin_r_parameters_weight_:
    name = "L_self_modules_convs_modules_0_modules_lin_r_parameters_weight_"
    shape = [256, 128]
    dtype = "torch.float32"
    device = "cpu"
    mean = 0.000
    std = 0.051
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_1_modules_lin_l_parameters_weight_:
    name = "L_self_modules_convs_modules_1_modules_lin_l_parameters_weight_"
    shape = [256, 256]
    dtype = "torch.float32"
    device = "cpu"
    mean = -0.000
    std = 0.036
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_1_modules_lin_l_parameters_bias_:
    name = "L_self_modules_convs_modules_1_modules_lin_l_parameters_bias_"
    shape = [256]
    dtype = "torch.float32"
    device = "cpu"
    mean = -0.001
    std = 0.037
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_1_modules_lin_r_parameters_weight_:
    name = "L_self_modules_convs_modules_1_modules_lin_r_parameters_weight_"
    shape = [256, 256]
    dtype = "torch.float32"
    device = "cpu"
    mean = -0.000
    std = 0.036
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_2_modules_lin_l_parameters_weight_:
    name = "L_self_modules_convs_modules_2_modules_lin_l_parameters_weight_"
    shape = [256, 256]
    dtype = "torch.float32"
    device = "cpu"
    mean = 0.000
    std = 0.036
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_2_modules_lin_l_parameters_bias_:
    name = "L_self_modules_convs_modules_2_modules_lin_l_parameters_bias_"
    shape = [256]
    dtype = "torch.float32"
    device = "cpu"
    mean = 0.005
    std = 0.038
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_2_modules_lin_r_parameters_weight_:
    name = "L_self_modules_convs_modules_2_modules_lin_r_parameters_weight_"
    shape = [256, 256]
    dtype = "torch.float32"
    device = "cpu"
    mean = -0.000
    std = 0.036
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_3_modules_lin_l_parameters_weight_:
    name = "L_self_modules_convs_modules_3_modules_lin_l_parameters_weight_"
    shape = [256, 256]
    dtype = "torch.float32"
    device = "cpu"
    mean = -0.000
    std = 0.036
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_3_modules_lin_l_parameters_bias_:
    name = "L_self_modules_convs_modules_3_modules_lin_l_parameters_bias_"
    shape = [256]
    dtype = "torch.float32"
    device = "cpu"
    mean = -0.000
    std = 0.036
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_3_modules_lin_r_parameters_weight_:
    name = "L_self_modules_convs_modules_3_modules_lin_r_parameters_weight_"
    shape = [256, 256]
    dtype = "torch.float32"
    device = "cpu"
    mean = -0.000
    std = 0.036
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_4_modules_lin_l_parameters_weight_:
    name = "L_self_modules_convs_modules_4_modules_lin_l_parameters_weight_"
    shape = [10, 256]
    dtype = "torch.float32"
    device = "cpu"
    mean = -0.001
    std = 0.036
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_4_modules_lin_l_parameters_bias_:
    name = "L_self_modules_convs_modules_4_modules_lin_l_parameters_bias_"
    shape = [10]
    dtype = "torch.float32"
    device = "cpu"
    mean = 0.011
    std = 0.028
    data = None


class Program_weight_tensor_meta_L_self_modules_convs_modules_4_modules_lin_r_parameters_weight_:
    name = "L_self_modules_convs_modules_4_modules_lin_r_parameters_weight_"
    shape = [10, 256]
    dtype = "torch.float32"
    device = "cpu"
    mean = -0.001
    std = 0.036
    data = None
