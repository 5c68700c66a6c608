
`I{"kind":"latency","target":"10.0.0.0/8","delay_ms":100,"duration_sec":30}€Ð•ÿ¼1"
dispatched