class Program_weight_tensor_data_0:
    name = "data_0"
    shape = []
    dtype = "int64"
    data = [3]
