// Karpenter with its kwok cloud provider, repairing as the AWS provider repairs.
//
// This is kubernetes-sigs/karpenter v1.9.0 kwok/main.go with one change: the cloud provider's
// RepairPolicies are those of the AWS provider, aws/karpenter-provider-aws v1.9.0
// pkg/cloudprovider/cloudprovider.go RepairPolicies (Ready False/Unknown 30 min, the node
// monitoring agent's AcceleratedHardwareReady 10 min, StorageReady, NetworkingReady,
// KernelReady and ContainerRuntimeReady 30 min), in place of the kwok provider's own (Ready
// False/Unknown 10 min, kwok/cloudprovider/cloudprovider.go). Everything else, the node health
// controller that acts on the policies included, is Karpenter's own code, unchanged.
//
// NOT the AWS provider's timing where REPAIR_TOLERATIONS names a condition: a comma list of
// CONDITION=DURATION (e.g. "AcceleratedHardwareReady=45s", a Go duration) replaces those
// conditions' tolerations, so a test can watch a repair fire within minutes. The process logs
// every policy it runs with at start, and where each toleration came from.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator"
)

// awsRepairPolicies is aws/karpenter-provider-aws v1.9.0 pkg/cloudprovider/cloudprovider.go
// RepairPolicies, entry for entry.
func awsRepairPolicies() []cloudprovider.RepairPolicy {
	return []cloudprovider.RepairPolicy{
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: 30 * time.Minute},
		{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 10 * time.Minute},
		{ConditionType: "StorageReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: "NetworkingReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: "KernelReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: "ContainerRuntimeReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
	}
}

// withRepairPolicies is the kwok provider answering RepairPolicies with other policies.
type withRepairPolicies struct {
	cloudprovider.CloudProvider
	policies []cloudprovider.RepairPolicy
}

func (w withRepairPolicies) RepairPolicies() []cloudprovider.RepairPolicy { return w.policies }

func policies(ctx context.Context) []cloudprovider.RepairPolicy {
	found := awsRepairPolicies()
	sources := make([]string, len(found))
	for i := range found {
		sources[i] = "aws/karpenter-provider-aws v1.9.0"
	}
	if text := os.Getenv("REPAIR_TOLERATIONS"); text != "" {
		for _, item := range strings.Split(text, ",") {
			condition, value, _ := strings.Cut(strings.TrimSpace(item), "=")
			toleration, err := time.ParseDuration(value)
			matched := false
			for i := range found {
				if string(found[i].ConditionType) == condition {
					found[i].TolerationDuration = toleration
					sources[i] = "REPAIR_TOLERATIONS, not the AWS provider's"
					matched = true
				}
			}
			if err != nil || toleration <= 0 || !matched {
				fmt.Fprintf(os.Stderr, "REPAIR_TOLERATIONS: %q is not CONDITION=DURATION with a condition of the AWS provider's policies and a positive Go duration\n", item)
				os.Exit(2)
			}
		}
	}
	for i, p := range found {
		log.FromContext(ctx).Info("repair policy", "condition", string(p.ConditionType),
			"status", string(p.ConditionStatus), "toleration", p.TolerationDuration.String(),
			"source", sources[i])
	}
	return found
}

func main() {
	ctx, op := operator.NewOperator()
	instanceTypes, err := kwok.ConstructInstanceTypes(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "failed constructing instance types")
	}

	overlayUndecoratedCloudProvider := withRepairPolicies{
		CloudProvider: kwok.NewCloudProvider(ctx, op.GetClient(), instanceTypes),
		policies:      policies(ctx),
	}
	cloudProvider := overlay.Decorate(overlayUndecoratedCloudProvider, op.GetClient(), op.InstanceTypeStore)
	clusterState := state.NewCluster(op.Clock, op.GetClient(), cloudProvider)
	op.
		WithControllers(ctx, controllers.NewControllers(
			ctx,
			op.Manager,
			op.Clock,
			op.GetClient(),
			op.EventRecorder,
			cloudProvider,
			overlayUndecoratedCloudProvider,
			clusterState,
			op.InstanceTypeStore,
		)...).Start(ctx)
}
