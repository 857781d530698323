module example.invalid/kvreg

go 1.19
