# quickstart.ps1 - the quick start on Windows (PowerShell 5.1 or 7): makes the random-weight test
# model, runs the nightly-summary example job over examples\docs, prints the first record.
#
#   powershell -ExecutionPolicy Bypass -File examples\windows\quickstart.ps1 [-Docpipe PATH]
#
# -Docpipe defaults to build\docpipe.exe (README.md, "Windows", says how to build it). The model
# is random, so the summaries are meaningless text: point model.path in the job at your
# Qwen3.5-4B GGUF file (for example C:\models\Qwen3.5-4B-Q4_K_M.gguf) for real ones.
param([string]$Docpipe = "build\docpipe.exe")
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..\..")
# docpipe writes UTF-8; show it as such
[Console]::OutputEncoding = [System.Text.Encoding]::UTF8

if (-not (Test-Path $Docpipe)) { throw "no ${Docpipe}: build docpipe.exe first (README.md, Windows)" }
New-Item -ItemType Directory -Force examples\models | Out-Null
if (-not (Test-Path examples\models\tiny-qwen35-q4_k_m.gguf)) {
    & $Docpipe make-test-model --arch qwen35 --hidden 256 --ffn 768 --layers 8 --head-dim 64 --ssm-dim 64 `
        --out examples\models\tiny-qwen35-f16.gguf
    if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }
    & $Docpipe quantize examples\models\tiny-qwen35-f16.gguf examples\models\tiny-qwen35-q4_k_m.gguf q4_k_m --quiet
    if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }
}
$job = "examples\jobs\nightly-summary.yaml"
Write-Host "--- docpipe validate $job"
& $Docpipe validate $job
if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }
Write-Host "--- docpipe run $job   (random weights: the text is meaningless by design)"
& $Docpipe run $job
# 0 = all done, 3 = some documents failed (errors.jsonl), 75 = stopped or locked: run again to resume
if ($LASTEXITCODE -ne 0 -and $LASTEXITCODE -ne 3) { exit $LASTEXITCODE }
Write-Host "--- the first result record"
$gz = [System.IO.File]::OpenRead("examples\jobs\out\nightly\results.jsonl.gz")
$reader = New-Object System.IO.StreamReader(
    (New-Object System.IO.Compression.GZipStream($gz, [System.IO.Compression.CompressionMode]::Decompress)),
    [System.Text.Encoding]::UTF8)
Write-Host $reader.ReadLine()
$reader.Close()
Write-Host "--- docpipe status $job   (run it again: unchanged documents are skipped)"
& $Docpipe status $job
