package main

import (
	"strings"
	"testing"
)

// predict's 100,000-row cap counts the --weight-dtype list too: nine formats of 10,000 x 10
// points are 900,000 rows (once an out-of-memory crash), refused naming every axis.
func TestPredictCapCountsWeightFormats(t *testing.T) {
	hermetic(t, "")
	_, code, msg := runCLI(t, "predict", "--model", "llama3-8b", "--gpu", "h200", "--format", "json",
		"--weight-dtype", "bf16,fp16,fp8,fp8-tensor,fp8-block,int8,int4,int4-zp,mxfp4", "--batch", "1-10000", "--context", "1-10")
	if code != exitUsage || !strings.Contains(msg, "--weight-dtype") || !strings.Contains(msg, "900000 rows") {
		t.Errorf("exit %d %q; want exit 2 counting 900000 rows over the formats", code, msg)
	}
}
