module inferencefleet/benchfront

go 1.22
