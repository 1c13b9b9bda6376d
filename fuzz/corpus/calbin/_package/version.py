VERSION = "0.7.6"
PACKER = "calbin-packer"
