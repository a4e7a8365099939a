class Program_weight_tensor_data_0:
    name = "data_0"
    shape = [5]
    dtype = "int32"
    data = [4, 3, 4, 3, 4]


class Program_weight_tensor_data_1:
    name = "data_1"
    shape = []
    dtype = "int64"
    data = [192]
