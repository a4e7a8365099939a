class Program_weight_tensor_data_0:
    name = "data_0"
    shape = [3]
    dtype = "int32"
    data = [96, 48, 32]


class Program_weight_tensor_data_1:
    name = "data_1"
    shape = []
    dtype = "int64"
    data = [96]
